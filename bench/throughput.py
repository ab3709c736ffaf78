"""``pmem_bench throughput``: observations per second through the model path, against what the
model server could give.

A scripted model server (:mod:`bench.slow_model`) answers each chat request after ``--latency``
seconds with at most ``--in-flight`` requests served at once; or ``--model-url`` names a real
endpoint. One stack per tree (gunicorn and ``--workers`` Celery prefork processes, real
subprocesses) ingests three streams of ``--observations`` text observations, each POSTed
through the API (``wait=0``) to one namespace and then split round-robin over eight:

- ``distinct``: every observation names new keys that share no word with any other;
- ``updates``: the same, but a third of the observations give a new value to a key of an
  observation at least five back (in the same namespace);
- ``similar``: new keys sharing words with earlier ones (``p3a_home_city`` then ``p3a_city``
  or ``p3a_city_home``), so soft key identity asks the model;
- ``ids``: prose whose keys look like ids (``Item k3f2a9c01b7e now shows shelf 5.``, the key
  ``k3f2a9c01b7e``), every third observation updating an earlier key of its namespace (any
  earlier one, the one just before included);
- ``entities``: keys the scripted model was not written for — an entity, its number and an
  attribute (``order_8812_status``, ``ticket_77_assignee``, ``mug_1_location``, LoCoMo's
  ``caroline_session_4_mood``), many sharing all their words but the number — every third
  observation updating an earlier key.

Every observation starts with ``They told me this.``, a line the rule extractor does not
understand, so each one goes to the model. Per stream and namespace count: obs/s (first POST to
the last commit), the ideal ``in_flight / (chat calls per observation x latency)`` and their
ratio, chat calls per observation (the server's count and the Evidence rows' sum), tokens per
observation, per-observation latency (``received_at`` to ``committed_at``) p50/p95, failures,
and the peak RSS of the worker processes (all of them, summed).

``--baseline DIR`` measures an older checkout beside this one: each tree runs in a process of
its own, from its own directory, on a PostgreSQL and Redis of its own (under
``var/bench-throughput/``), against the same model server, the trees alternating over
``--rounds`` (:mod:`bench.trees`). That measuring half runs from this file in the other tree
(``--child``) with this checkout's ``bench`` package (its processes: :mod:`bench.servers`), so
of the tree it imports only what every tree has: ``pmem_site.embedded``, ``memory.services``'
namespace and token services, and the ``memory_evidence`` table.
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import requests

# Absolute: the child runs this file as a script, with this checkout's bench package.
from bench.servers import Stack
from bench.trees import run_in_tree

NAME = "throughput"
STREAMS = ("distinct", "updates", "similar", "ids", "entities")
NAMESPACES = (1, 8)
FIRST_LINE = "They told me this."
UPDATE_GAP = 5  # an update names a key of an observation at least this many back
#: Attribute word pairs of the similar stream's keys (a subject word is put before each).
ATTRIBUTES = (("home", "city"), ("birth", "date"), ("phone", "number"), ("email", "address"),
              ("shoe", "size"), ("blood", "type"), ("car", "model"), ("pet", "name"),
              ("favorite", "food"), ("work", "title"), ("gym", "day"), ("coffee", "order"))
HERE = Path(__file__).resolve()


# --- the streams -------------------------------------------------------------------------------


def _hex(rng: random.Random, prefix: str) -> str:
    return f"{prefix}{rng.getrandbits(28):07x}"


#: The entities of the ``entities`` stream: a name, the range of its numbers, its attributes.
ENTITIES = (("order", (1000, 9999), ("status", "carrier")), ("ticket", (1, 999), ("assignee",)),
            ("mug", (1, 40), ("location",)), ("room", (100, 450), ("temperature", "occupant")),
            ("invoice", (10000, 99999), ("total",)), ("caroline_session", (1, 30), ("mood",)),
            ("device", (1, 2**28), ("firmware",)))
ITEM = re.compile(r"^Item (\S+) now shows (.+?)\.$")


def _updating(kind: str, n: int, lanes: int, seed: int) -> list[str]:
    """The ``ids`` and ``entities`` streams: one new key per observation, but every third
    observation gives a new value to an earlier key of its namespace."""
    rng = random.Random(f"{kind}-{n}-{lanes}-{seed}")
    keys: list[list[str]] = [[] for _ in range(lanes)]
    taken: set[str] = set()
    texts = []
    for i in range(n):
        lane = keys[i % lanes]
        if i % 3 == 2 and lane:
            key = rng.choice(lane)
        else:
            key = ""
            while not key or key in taken:
                if kind == "ids":
                    key = f"k{rng.getrandbits(44):011x}"
                else:
                    entity, (lo, hi), attrs = rng.choice(ENTITIES)
                    number = rng.randint(lo, hi)
                    key = (f"{entity}_{number:08x}_{rng.choice(attrs)}" if entity == "device" else
                           f"{entity}_{number}_{rng.choice(attrs)}")
            taken.add(key)
            lane.append(key)
        if kind == "ids":
            texts.append(f"Item {key} now shows shelf {i + 1}.")
        else:
            texts.append(f"{FIRST_LINE}\n{key} = {_hex(rng, 'v')}")
    return texts


def keys_of(text: str) -> list[str]:
    """The keys an observation of these streams names."""
    found = ITEM.match(text.strip())
    if found:
        return [found.group(1)]
    return [line.split(" = ", 1)[0] for line in text.splitlines()[1:] if " = " in line]


def make_stream(kind: str, n: int, lanes: int = 1, seed: int = 23) -> list[str]:
    """``n`` observation texts of the stream ``kind``; ``lanes`` is the number of namespaces
    it will be split over (round-robin), so that an update or a similar key refers to a key of
    its own namespace."""
    if kind not in STREAMS:
        raise ValueError(f"stream must be one of {STREAMS}")
    if kind in ("ids", "entities"):
        return _updating(kind, n, lanes, seed)
    rng = random.Random(f"{kind}-{n}-{lanes}-{seed}")
    keys: list[list[str]] = []  # per observation, the keys it named
    bases: list[tuple[int, str, str, str]] = []  # similar: (observation, subject, word, word)
    texts = []
    for i in range(n):
        earlier = [j for j in range(i) if j % lanes == i % lanes]
        facts: list[tuple[str, str]] = []
        count = rng.randint(1, 3)
        if kind == "updates" and i % 3 == 2:
            older = [j for j in earlier if j <= i - UPDATE_GAP]
            if older:
                facts.append((rng.choice(keys[rng.choice(older)]), _hex(rng, "new ")))
        if kind == "similar":
            mine = [b for b in bases if b[0] in earlier]
            if mine:
                _, subject, first, second = rng.choice(mine)
                # word sets equal (the model says same) or not (different), alternately
                variant = (f"{subject}_{second}_{first}" if len(bases) % 2 else
                           f"{subject}_{second}")
                facts.append((variant, _hex(rng, "v")))
        while len(facts) < count:
            if kind == "similar":
                subject, (first, second) = _hex(rng, "p"), rng.choice(ATTRIBUTES)
                bases.append((i, subject, first, second))
                facts.append((f"{subject}_{first}_{second}", _hex(rng, "v")))
            else:
                facts.append((f"{_hex(rng, 'k')}_{_hex(rng, 'q')}", _hex(rng, "v")))
        keys.append([k for k, _ in facts])
        texts.append("\n".join([FIRST_LINE, *(f"{k} = {v}" for k, v in facts)]))
    return texts


def expected_heads(texts: list[str], lanes: int) -> list[dict[str, str]]:
    """Per namespace, each key's last value: the heads a stream without renamed keys leaves."""
    heads: list[dict[str, str]] = [{} for _ in range(lanes)]
    for i, text in enumerate(texts):
        found = ITEM.match(text.strip())
        pairs = ([(found.group(1), found.group(2))] if found else
                 [tuple(line.split(" = ", 1)) for line in text.splitlines()[1:] if " = " in line])
        heads[i % lanes].update((k, v) for k, v in pairs)
    return heads


def heads_right(namespace_ids: list[int], texts: list[str], stream: str) -> bool | None:
    """Do the namespaces' heads equal the stream's last values? None for ``similar``, whose
    keys soft identity may merge."""
    if stream == "similar":
        return None
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT c.namespace_id, c.key, v.value FROM memory_cell c"
                    " JOIN memory_version v ON v.id = c.head_id WHERE c.namespace_id = ANY(%s)",
                    [namespace_ids])
        found: dict[int, dict[str, str]] = {}
        for ns, key, value in cur.fetchall():
            found.setdefault(int(ns), {})[key] = value
    want = expected_heads(texts, len(namespace_ids))
    return all(found.get(ns, {}) == want[i] for i, ns in enumerate(namespace_ids))


def repeats(texts: list[str]) -> int:
    """Observations that name a key an earlier observation of the stream named."""
    seen: set[str] = set()
    count = 0
    for text in texts:
        keys = set(keys_of(text))
        count += bool(keys & seen)
        seen |= keys
    return count


# --- one measurement ---------------------------------------------------------------------------


def _server_stats(url: str | None) -> dict[str, Any] | None:
    if not url:
        return None
    answer = requests.get(url, timeout=10)
    answer.raise_for_status()
    return dict(answer.json())


def _quiet(url: str | None, timeout: float = 30.0) -> None:
    """Wait until the model server serves nothing: the health check's probe of the model
    (the stack's readiness) must not share a measurement's slots."""
    deadline = time.monotonic() + timeout
    while url and time.monotonic() < deadline:
        stats = _server_stats(url) or {}
        if not stats.get("serving") and not stats.get("waiting"):
            return
        time.sleep(0.1)


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _evidence(namespace_ids: list[int]) -> list[tuple[Any, ...]]:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT state, extract(epoch FROM received_at),"
                    " extract(epoch FROM committed_at), chat_calls, prompt_tokens,"
                    " completion_tokens FROM memory_evidence WHERE namespace_id = ANY(%s)",
                    [namespace_ids])
        return list(cur.fetchall())


def _wait_settled(namespace_ids: list[int], expected: int, timeout: float, label: str) -> None:
    began = time.monotonic()
    deadline = began + timeout
    tty = sys.stderr.isatty()
    while True:
        rows = _evidence(namespace_ids)
        settled = sum(r[0] not in ("pending", "processing") for r in rows)
        done = len(rows) >= expected and settled == len(rows)
        if tty or done:
            sys.stderr.write(f"\r{label}: {settled}/{expected} settled "
                             f"{time.monotonic() - began:.0f}s" + ("\n" if done else ""))
            sys.stderr.flush()
        if done:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"observations still unsettled after {timeout:.0f}s")
        time.sleep(0.05)


def _post_stream(stack: Stack, texts: list[str], lanes: int, run: str,
                 stream: str) -> tuple[list[int], float]:
    """POST every observation (``wait=0``), round-robin over ``lanes`` new namespaces;
    the namespaces' ids and the epoch time of the first POST."""
    from memory.services import namespace_create, token_create

    sessions, ids = [], []
    cell = uuid.uuid4().hex[:6]  # a tree's data outlives a round: new namespaces every time
    for lane in range(lanes):
        ns = namespace_create(name=f"tp-{run}-{cell}-{stream}-{lanes}-{lane}")
        session = requests.Session()
        session.headers["Authorization"] = f"Token {token_create(namespace=ns, client='tp').key}"
        sessions.append((session, f"{stack.url}/api/v1/namespaces/{ns.name}/observations/"))
        ids.append(int(ns.pk))
    started = time.time()
    for i, text in enumerate(texts):
        session, url = sessions[i % lanes]
        answer = session.post(url, json={"text": text, "source": f"tp:{stream}"}, timeout=60)
        if answer.status_code not in (201, 202):
            raise RuntimeError(f"POST answered {answer.status_code}: {answer.text[:300]}")
    return ids, started


def measure_cell(stack: Stack, params: dict[str, Any], stream: str, lanes: int) -> dict[str, Any]:
    """One stream through one stack, split over ``lanes`` namespaces: its row of figures."""
    n = int(params["observations"])
    texts = make_stream(stream, n, lanes)
    stats_url = params.get("stats_url")
    if stats_url:
        requests.post(f"{stats_url}/reset", timeout=10)
    before = _server_stats(stats_url)
    stack.reset_peaks()
    cpu_before, stack_before = _cpu_times(), stack.cpu_seconds()
    ids, started = _post_stream(stack, texts, lanes, params["run"], stream)
    _wait_settled(ids, n, float(params.get("timeout", 1800)),
                  f"{params.get('label', NAME)} {stream} x{lanes}")
    ended = time.time()
    cpu = _cpu_busy(cpu_before, _cpu_times())
    stack_cpu = {name: used - stack_before.get(name, 0.0)
                 for name, used in stack.cpu_seconds().items()}
    after = _server_stats(stats_url)
    rows = _evidence(ids)
    committed = [r for r in rows if r[0] == "committed"]
    last = max((float(r[2]) for r in committed if r[2] is not None), default=ended)
    elapsed = max(last - started, 1e-6)
    latencies = [float(r[2]) - float(r[1]) for r in committed if r[2] is not None]
    row: dict[str, Any] = {
        "stream": stream, "namespaces": lanes, "observations": n,
        "embedder": params.get("embedder") or os.environ.get("PMEM_EMBEDDER", "minilm"),
        "facts": sum(len(keys_of(t)) for t in texts), "repeats": repeats(texts),
        "committed": len(committed),
        "failed": sum(r[0] == "failed" for r in rows), "seconds": round(elapsed, 2),
        "obs_per_s": round(n / elapsed, 3),
        "evidence_chat_calls_per_obs": round(sum(r[3] for r in rows) / n, 3),
        "evidence_prompt_tokens_per_obs": round(sum(r[4] for r in rows) / n, 1),
        "evidence_completion_tokens_per_obs": round(sum(r[5] for r in rows) / n, 1),
        "heads_right": heads_right(ids, texts, stream),
        "latency_p50_s": _round(_pct(latencies, 0.5)),
        "latency_p95_s": _round(_pct(latencies, 0.95)),
        "worker_rss_peak_mib": round(stack.peak["worker"] / 2**20, 1),
        "machine_cpu_busy": cpu,
        # CPU seconds per observation of the stack's processes (the worker: extraction's
        # parsing and embedding, planning, commits; web: the POSTs)
        "worker_cpu_s_per_obs": round(stack_cpu["worker"] / n, 4),
        "web_cpu_s_per_obs": round(stack_cpu["web"] / n, 4),
    }
    if before is not None and after is not None:
        calls = after["chat_calls"] - before["chat_calls"]
        row.update({
            "server_chat_calls": calls, "server_chat_calls_per_obs": round(calls / n, 3),
            "server_calls_by_job": {
                job: count - before["counts"].get(job, 0)
                for job, count in after["counts"].items() if count > before["counts"].get(job, 0)},
            "calls_per_obs_by_kind": {
                job: round((after["counts"].get(job, 0) - before["counts"].get(job, 0)) / n, 3)
                for job in ("extraction", "identity", "annotation")},
            "server_errors_by_job": {
                job: count - before["errors"].get(job, 0)
                for job, count in after["errors"].items() if count > before["errors"].get(job, 0)},
            "server_prompt_tokens_per_obs": round(
                (after["prompt_tokens"] - before["prompt_tokens"]) / n, 1),
            "server_completion_tokens_per_obs": round(
                (after["completion_tokens"] - before["completion_tokens"]) / n, 1),
            "extraction_facts_with_head_shown":
                after["extraction_facts_with_head_shown"]
                - before["extraction_facts_with_head_shown"],
            "server_max_in_flight": after["max_in_flight"],
            **slot_losses(after.get("spans") or [], started=started, last=last,
                          in_flight=int(params["in_flight"])),
            "server_max_waiting": after["max_waiting"],
        })
    row["commit_times"] = sorted(round(float(r[2]) - started, 3) for r in committed
                                 if r[2] is not None)
    row["evidence_chat_calls"] = sum(r[3] for r in rows)
    latency = params.get("latency")
    if latency is None and before is not None and after is not None:
        # a real endpoint: the mean time its calls held a slot in this measurement
        calls = after["chat_calls"] - before["chat_calls"]
        latency = (after["busy_seconds"] - before["busy_seconds"]) / calls if calls else None
    row["latency_s"] = _round(latency)
    return add_ideal(row, latency=latency or 0.0, in_flight=int(params["in_flight"]))


def _warm_up(stack: Stack, params: dict[str, Any]) -> None:
    """A few observations over as many namespaces as worker processes, not measured: each
    process's first model call, thread pool and connections are set up before the first cell
    (else the first cell measured carries seconds of start-up that the others do not)."""
    workers = max(1, int(params["workers"]))
    texts = make_stream("distinct", 4 * workers, workers, seed=7)
    ids, _ = _post_stream(stack, texts, workers, params["run"], "warm-up")
    _wait_settled(ids, len(texts), float(params.get("timeout", 1800)), "warm-up")
    _quiet(params.get("stats_url"))


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _cpu_times() -> tuple[int, int] | None:
    """(busy, total) jiffies of every CPU of the machine (Linux), None elsewhere."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def _cpu_busy(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """The machine's CPU busy between two readings (every process, the other tree's idle
    stack and other users included), 0..1."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return round((after[0] - before[0]) / (after[1] - before[1]), 3)


def slot_losses(spans: list[list[float]], *, started: float, last: float,
                in_flight: int) -> dict[str, Any]:
    """Where the server's slot-seconds (``in_flight`` x the cell's seconds) went unused, as
    fractions of them: before the first call began (``lead``: the POSTs, the task, the first
    extraction's start), between the first call's start and the last call's end (``gaps``:
    slots the pipeline left empty), after the last call (``tail``: committing what it
    answered). ``used`` is the rest; it is the ratio to the ideal when calls take the
    latency."""
    total = in_flight * max(last - started, 1e-6)
    if not spans:
        return {}
    first, final = min(s[0] for s in spans), max(s[1] for s in spans)
    busy = sum(s[1] - s[0] for s in spans)
    lead = in_flight * max(first - started, 0.0)
    tail = in_flight * max(last - final, 0.0)
    return {"call_spans": sorted([round(a - started, 3), round(b - started, 3)] for a, b in spans),
            "slots_used": round(busy / total, 3), "slots_lead": round(lead / total, 3),
            "slots_gaps": round((in_flight * (final - first) - busy) / total, 3),
            "slots_tail": round(tail / total, 3)}


def add_ideal(row: dict[str, Any], *, latency: float, in_flight: int) -> dict[str, Any]:
    """``ideal = in_flight / (chat calls per observation x latency)``, from the server's count
    of calls where there is one, and ``ratio = obs/s / ideal``."""
    calls = row.get("server_chat_calls_per_obs", row["evidence_chat_calls_per_obs"])
    ideal = in_flight / (calls * latency) if calls and latency else None
    row["ideal_obs_per_s"] = None if ideal is None else round(ideal, 3)
    row["ratio"] = None if ideal is None else round(row["obs_per_s"] / ideal, 3)
    return row


def measure(params: dict[str, Any], progress: Any = None) -> dict[str, Any]:
    """Every stream x namespace count through one stack of the tree this runs in, per
    embedder of ``params["embedders"]`` (a stack each; unset: the environment's)."""
    embedders = params.get("embedders") or [os.environ.get("PMEM_EMBEDDER", "minilm")]
    cells = [(e, s, k) for e in embedders for s in params["streams"]
             for k in params["namespaces"]]
    rows: list[dict[str, Any]] = []
    root = ""
    for embedder in embedders:
        env = {"PMEM_LLM_BASE_URL": params["model_url"],
               "PMEM_MODEL_CONCURRENCY": str(params["model_concurrency"]),
               "PMEM_WORKERS": str(params["workers"]), "PMEM_EMBEDDER": embedder}
        if params.get("model"):
            env["PMEM_LLM_MODEL"] = params["model"]
        stack = Stack(logs=Path(params["logs"]) / embedder, queue_prefix="pmem-tp",
                      workers=int(params["workers"]), env=env, ready_timeout=120.0).start()
        root = str(stack.root)
        mine = {**params, "embedder": embedder}
        try:
            _quiet(params.get("stats_url"))
            _warm_up(stack, mine)
            for stream, lanes in [(s, k) for e, s, k in cells if e == embedder]:
                rows.append(measure_cell(stack, mine, stream, lanes))
                if progress is not None:
                    progress(len(rows), len(cells))
        finally:
            stack.stop()
    return {"tree": root, "rows": rows}


# --- the child: one tree, its own PostgreSQL and Redis -------------------------------------------


def child(out: Path, params: dict[str, Any]) -> None:
    import django

    from pmem_site import embedded

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pmem_site.settings")
    embedded.start()  # this tree's PostgreSQL and Redis, under its PMEM_DATA_DIR
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    out.write_text(json.dumps(measure(params), indent=1))


def run_child(label: str, tree: Path, params: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    """Measure ``tree`` in a process of its own, from that directory, on its own data."""
    out_dir = out_dir.resolve()  # the child runs in the other tree
    out = out_dir / f"throughput-{label}.json"
    params = {**params, "label": label, "logs": str(out_dir / f"throughput-logs-{label}")}
    return run_in_tree(HERE, ["--child", str(out), json.dumps(params)], tree=tree, out=out,
                       data=HERE.parent.parent / "var" / "bench-throughput" / f"data-{label}",
                       bench_from_here=True)


if __name__ == "__main__" and sys.argv[1:2] == ["--child"]:
    child(Path(sys.argv[2]), json.loads(sys.argv[3]))
