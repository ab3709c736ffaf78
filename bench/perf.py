"""``pmem_bench perf``: the write and read paths measured side by side with the floor (issue 7).

Everything is measured in ONE run on the same machine, and the report leans on ratios (this
machine is small and shared, so absolute figures drift from run to run):

- **ingest**: facts/s through the services in-process (``observation_ingest`` one observation
  of 30 structured facts per call, and ``observations_ingest`` 100 at a time, committed by
  group commit) and through the HTTP API (gunicorn) + a real Celery worker, against the
  floor: the same rows written by ``COPY`` into a scratch table (one COPY for all, and one COPY
  + COMMIT per observation). SQL statements and WAL bytes per fact. Every rate includes the
  final flush of the frontier index (cells a commit left outside the HNSW index).
- **scale**: a FactConsolidation stream (18,332 facts) through the rule extractor, end to end
  (API + worker, and in-process); peak RSS of the web and worker processes meanwhile.
- **growth**: one namespace from 1k versions up to the scale's ceiling over a fixed set of
  cells (40 versions per cell at the end): ingest rate, database bytes per fact, statements
  per fact, and the reads at 1x and 40x history (same cells).
- **reads**: ``cell_value`` vs a bare primary-key SELECT; frontier top-12 by HNSW on scratch
  tables of 10k / 100k (/ 1M) cells against an exact scan (recall@12, p50/p95), over a grid
  of ``m`` / ``ef_construction`` / ``hnsw.ef_search``, and ``halfvec``.
- **rollback**: revoke on a 1,000-version chain vs a 2-version chain.
- **graph memory**: peak RSS of a gunicorn worker serving one cell's graph, the key grown to
  1, 5, 20 observations of 500 facts x 1.9 KB (``bench/perf_graph.py``; ``--only graph`` runs
  it alone, ``--baseline DIR`` measures older code beside this one).

The scratch tables (``perf_*``) live in the benchmark's database and are dropped at the end.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NAME = "perf"
FACTS_PER_OBSERVATION = 30
TOP_K = 12

GOALS = {
    "services_facts_per_s": 2000.0,
    "api_facts_per_s": 500.0,
    "services_vs_copy": 10.0,
    "stream_seconds": 60.0,
    "point_read_ratio": 2.0,
    "frontier_p95_ms_100k": 20.0,
    "recall_at_12": 0.95,
    "rollback_ratio": 1.5,
}


@dataclass(frozen=True)
class Scale:
    ingest_observations: int  # observations of 30 facts, per ingest path
    growth_versions: int  # the growth run's ceiling (1k .. this), over growth_versions/40 cells
    frontier_sizes: tuple[int, ...]  # scratch-table sizes for the HNSW reads
    stream_facts: int  # the FactConsolidation stream through the rule extractor
    grid: tuple[tuple[int, int], ...]  # (m, ef_construction) builds at the smallest size
    growth_budget_s: float = 420.0  # the growth run stops here, and says so
    queries: int = 200  # frontier queries per configuration
    chain: int = 1000  # versions in the long rollback chain


SCALES = {
    "small": Scale(40, 12_000, (10_000, 30_000), 4_580, ((16, 64), (8, 32)), 90.0),
    "medium": Scale(300, 100_000, (10_000, 100_000), 18_332, ((16, 64), (8, 32), (24, 96))),
    "full": Scale(600, 1_000_000, (10_000, 100_000, 1_000_000), 18_332,
                  ((16, 64), (8, 32), (24, 96)), 4 * 3600.0),
}
EF_SEARCH = (20, 40, 100, 200, 300)
INSERT_PROBE = 500  # vectors inserted one by one into each built index (the flush's cost)


@dataclass
class Perf:
    """What one run collects: flat result rows and the series the plots draw."""

    scale: str
    run_id: str
    out: Path
    progress: Callable[[int, int], None]
    rows: list[dict[str, Any]] = field(default_factory=list)
    series: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    stage: int = 0
    stages: int = 7

    def add(self, section: str, metric: str, value: Any, unit: str = "", **extra: Any) -> None:
        if isinstance(value, float):
            value = round(value, 4 if abs(value) < 10 else 1)
        self.rows.append({"section": section, "metric": metric, "value": value, "unit": unit,
                          **extra})

    def say(self, text: str) -> None:
        sys.stderr.write(f"perf [{self.stage}/{self.stages}] {text}\n")
        sys.stderr.flush()

    def next_stage(self, name: str) -> None:
        self.stage += 1
        self.progress(self.stage - 1, self.stages)
        self.say(name)


# --- small tools ------------------------------------------------------------------------------


def _cursor() -> Any:
    from django.db import connection

    return connection.cursor()


def _scalar(sql: str, params: list[Any] | None = None) -> Any:
    with _cursor() as cur:
        cur.execute(sql, params or [])
        return cur.fetchone()[0]


def _wal_lsn() -> str:
    return str(_scalar("SELECT pg_current_wal_insert_lsn()::text"))


def _wal_since(lsn: str) -> int:
    return int(_scalar("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %s::pg_lsn)", [lsn]))


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _ms(values: list[float]) -> tuple[float, float]:
    return 1000 * _pct(values, 0.5), 1000 * _pct(values, 0.95)


class StatementCounter:
    """Counts the SQL statements Django executes (``connection.execute_wrapper``), cheaply
    enough to stay on during a timed run. Transaction control (BEGIN/COMMIT) is not counted."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        self.n += 1
        return execute(sql, params, many, context)

    @contextlib.contextmanager
    def on(self) -> Iterator[StatementCounter]:
        from django.db import connection

        with connection.execute_wrapper(self):
            yield self


def _facts(prefix: str, first: int, keys: int, round_: int) -> list[dict[str, str]]:
    return [{"key": f"{prefix}_{(first + j) % keys}_attr",
             "value": f"value {round_} of {prefix} {(first + j) % keys}"}
            for j in range(FACTS_PER_OBSERVATION)]


def _namespace(perf: Perf, part: str) -> Any:
    from memory.services import namespace_create

    return namespace_create(name=f"perf-{perf.run_id}-{part}".lower()[:100])


def _vector_literal(vector: Any) -> str:
    return "[" + ",".join(f"{x:.6g}" for x in vector) + "]"


# --- 1. ingest: services, COPY floor ----------------------------------------------------------


def _ingest_services(perf: Perf) -> float:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from memory.services import observation_ingest

    scale = SCALES[perf.scale]
    ns = _namespace(perf, "ingest")
    n = scale.ingest_observations
    keys = n * FACTS_PER_OBSERVATION // 2  # every key written twice: half new, half overwrite
    for i in range(3):  # warm caches and the embedder
        observation_ingest(namespace=ns, facts=_facts("warm", i * 30, 90, i))
    with CaptureQueriesContext(connection) as captured:
        for i in range(3, 6):
            observation_ingest(namespace=ns, facts=_facts("count", i * 30, 90, i))
    per_obs = len(captured.captured_queries) / 3
    lsn = _wal_lsn()
    started = time.perf_counter()
    for i in range(n):
        observation_ingest(namespace=ns, facts=_facts("fact", i * 30, keys, i))
        if i % 10 == 0:
            perf.progress(perf.stage - 1, perf.stages)
    committed = time.perf_counter() - started
    flush = _flush(ns)
    elapsed = committed + flush
    wal = _wal_since(lsn)
    facts = n * FACTS_PER_OBSERVATION
    rate = facts / elapsed
    perf.add("ingest", "services facts/s (one observation per call, incl. index flush)", rate,
             "facts/s", goal=GOALS["services_facts_per_s"],
             met=rate >= GOALS["services_facts_per_s"])
    perf.add("ingest", "services facts/s (one observation per call, commits only)",
             facts / committed, "facts/s")
    perf.add("ingest", "services frontier flush at the end", flush, "s")
    perf.add("ingest", "services statements per observation (incl. BEGIN/COMMIT)", per_obs)
    perf.add("ingest", "services statements per fact", per_obs / FACTS_PER_OBSERVATION)
    perf.add("ingest", "services WAL bytes per fact", wal / facts, "B")
    perf.add("ingest", "services seconds", elapsed, "s", facts=facts)

    # The same observations recorded 100 at a time and committed by group commit (an import,
    # or a worker draining a backlog): same rows, same seq order, fewer transactions.
    from memory.services import observations_ingest

    ns = _namespace(perf, "ingest-grouped")
    lsn = _wal_lsn()
    started = time.perf_counter()
    for first in range(0, n, 100):
        observations_ingest(namespace=ns, observations=[
            {"facts": _facts("fact", i * 30, keys, i)} for i in range(first, min(n, first + 100))])
        perf.progress(perf.stage - 1, perf.stages)
    committed = time.perf_counter() - started
    flush = _flush(ns)
    grouped = committed + flush
    grouped_rate = facts / grouped
    perf.add("ingest", "services facts/s (group commit, incl. index flush)", grouped_rate,
             "facts/s", goal=GOALS["services_facts_per_s"],
             met=grouped_rate >= GOALS["services_facts_per_s"])
    perf.add("ingest", "services facts/s (group commit, commits only)", facts / committed,
             "facts/s")
    perf.add("ingest", "services WAL bytes per fact (group commit)", _wal_since(lsn) / facts, "B")
    return min(elapsed, grouped)


def _flush(ns: Any) -> float:
    """Index what the run left outside the frontier index (after the background indexer is
    done with what it was asked to flush); seconds it took."""
    from memory.services.frontier import frontier_flush, frontier_flush_wait

    started = time.perf_counter()
    frontier_flush_wait()
    frontier_flush(namespace_id=ns.pk)
    return time.perf_counter() - started


def _copy_floor(perf: Perf, services_seconds: float) -> None:
    """The same number of rows as the services wrote, by COPY into a scratch table shaped like
    a version row: once in one COPY, and once as one COPY + COMMIT per observation."""
    from django.db import connection, transaction

    scale = SCALES[perf.scale]
    facts = scale.ingest_observations * FACTS_PER_OBSERVATION
    with _cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS perf_copy_floor")
        cur.execute("CREATE TABLE perf_copy_floor (id bigserial PRIMARY KEY, cell_id bigint,"
                    " value text, status varchar(16), valid_from timestamptz, support int)")
    rows = [(i % (facts // 2), f"value {i} of fact {i % (facts // 2)}", "active") for i in
            range(facts)]

    def copy(chunk: list[tuple[int, str, str]]) -> None:
        with connection.cursor() as cur, cur.connection.cursor().copy(
                "COPY perf_copy_floor (cell_id, value, status, valid_from, support)"
                " FROM STDIN") as cp:
            for cell_id, value, status in chunk:
                cp.write_row((cell_id, value, status, "2026-01-01T00:00:00Z", 1))

    lsn = _wal_lsn()
    started = time.perf_counter()
    with transaction.atomic():
        copy(rows)
    bulk = time.perf_counter() - started
    bulk_wal = _wal_since(lsn)
    lsn = _wal_lsn()
    started = time.perf_counter()
    for i in range(0, facts, FACTS_PER_OBSERVATION):
        with transaction.atomic():
            copy(rows[i:i + FACTS_PER_OBSERVATION])
    per_obs = time.perf_counter() - started
    per_obs_wal = _wal_since(lsn)
    with _cursor() as cur:
        cur.execute("DROP TABLE perf_copy_floor")
    perf.add("ingest", "COPY floor facts/s (one COPY)", facts / bulk, "facts/s")
    perf.add("ingest", "COPY floor WAL bytes per fact (one COPY)", bulk_wal / facts, "B")
    perf.add("ingest", "COPY floor facts/s (COPY+COMMIT per 30 rows)", facts / per_obs, "facts/s")
    perf.add("ingest", "COPY floor WAL bytes per fact (per 30 rows)", per_obs_wal / facts, "B")
    ratio = services_seconds / bulk
    perf.add("ingest", "services / COPY time ratio (one COPY)", ratio, "x",
             goal=GOALS["services_vs_copy"], met=ratio <= GOALS["services_vs_copy"])
    perf.add("ingest", "services / COPY time ratio (per-observation COPY)",
             services_seconds / per_obs, "x")


# --- 2. API + worker, and the stream through the rule extractor ---------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Stack:
    """A gunicorn web process and a Celery worker (real subprocesses, own queue), sharing the
    benchmark's embedded PostgreSQL and Redis; their RSS is sampled while it runs."""

    def __init__(self, perf: Perf, patterns: Path | None) -> None:
        self.queue = f"pmem-perf-{uuid.uuid4().hex[:8]}"
        self.port = _free_port()
        self.logs = perf.out / "perf-logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        from django.db import connection

        self.env = {**os.environ, "PMEM_QUEUE": self.queue, "PYTHONUNBUFFERED": "1",
                    "DJANGO_SETTINGS_MODULE": "pmem_site.settings",
                    "PMEM_TEST_DB_NAME": str(connection.settings_dict["NAME"]),
                    "PMEM_LOG_LEVEL": "WARNING",
                    "PMEM_RULE_PATTERNS": str(patterns or "")}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.peak: dict[str, int] = {"web": 0, "worker": 0, "worker_max_process": 0}
        self._stop = threading.Event()
        self._sampler: threading.Thread | None = None

    def start(self) -> Stack:
        root = Path(__file__).resolve().parent.parent
        web = [sys.executable, "-m", "gunicorn", "pmem_site.wsgi:application", "-b",
               f"127.0.0.1:{self.port}", "--workers", "1", "--threads", "4", "-k", "gthread",
               "--log-level", "warning"]
        worker = [sys.executable, "-m", "celery", "-A", "pmem_site", "worker", "-Q",
                  self.queue, "-n", f"{self.queue}@%h", "--pool", "prefork", "--concurrency",
                  "2", "--loglevel", "INFO", "--without-gossip", "--without-mingle",
                  "--without-heartbeat"]
        for name, cmd in (("web", web), ("worker", worker)):
            log = (self.logs / f"{name}.log").open("ab")
            self.procs[name] = subprocess.Popen(cmd, cwd=root, env=self.env, stdout=log,
                                                stderr=subprocess.STDOUT, start_new_session=True)
        self._wait_ready()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()
        return self

    def _wait_ready(self, timeout: float = 90.0) -> None:
        import requests

        deadline = time.monotonic() + timeout
        web_ok = worker_ok = False
        while time.monotonic() < deadline and not (web_ok and worker_ok):
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited: see {self.logs / name}.log")
            if not web_ok:
                with contextlib.suppress(Exception):
                    web_ok = requests.get(f"{self.url}/healthz", timeout=2).status_code < 500
            if not worker_ok:
                text = (self.logs / "worker.log").read_text(errors="replace")
                worker_ok = any(self.queue in line and line.rstrip().endswith("ready.")
                                for line in text.splitlines())
            time.sleep(0.2)
        if not (web_ok and worker_ok):
            self.stop()
            raise RuntimeError(f"web/worker not ready after {timeout:.0f}s (logs: {self.logs})")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _group_rss(self, name: str) -> tuple[int, int]:
        import psutil

        proc = self.procs[name]
        try:
            main = psutil.Process(proc.pid)
            members = [main, *main.children(recursive=True)]
        except psutil.Error:
            return 0, 0
        sizes = []
        for p in members:
            with contextlib.suppress(psutil.Error):
                sizes.append(p.memory_info().rss)
        return sum(sizes), max(sizes, default=0)

    def _sample(self) -> None:
        while not self._stop.is_set():
            web, _ = self._group_rss("web")
            worker, worker_max = self._group_rss("worker")
            self.peak["web"] = max(self.peak["web"], web)
            self.peak["worker"] = max(self.peak["worker"], worker)
            self.peak["worker_max_process"] = max(self.peak["worker_max_process"], worker_max)
            self._stop.wait(0.25)

    def reset_peaks(self) -> None:
        self.peak = dict.fromkeys(self.peak, 0)

    def stop(self) -> None:
        import signal

        self._stop.set()
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)


def _unsettled(namespace_id: int) -> int:
    return int(_scalar("SELECT count(*) FROM memory_evidence WHERE namespace_id = %s AND"
                       " state IN ('pending', 'processing')", [namespace_id]))


def _post_all(stack: Stack, ns: Any, bodies: list[dict[str, Any]], perf: Perf,
              timeout: float = 1800.0) -> float:
    """POST every observation (wait=0), then wait until the worker committed them all;
    seconds from the first POST to the last commit."""
    import requests

    from memory.services import token_create

    token = token_create(namespace=ns, client="perf").key
    session = requests.Session()
    session.headers["Authorization"] = f"Token {token}"
    url = f"{stack.url}/api/v1/namespaces/{ns.name}/observations/"
    started = time.perf_counter()
    for i, body in enumerate(bodies):
        answer = session.post(url, json=body, timeout=60)
        if answer.status_code != 202:
            raise RuntimeError(f"POST answered {answer.status_code}: {answer.text[:300]}")
        if i % 20 == 0:
            perf.progress(perf.stage - 1, perf.stages)
    deadline = time.monotonic() + timeout
    while _unsettled(ns.pk):
        if time.monotonic() > deadline:
            raise RuntimeError(f"observations still unsettled after {timeout:.0f}s")
        time.sleep(0.05)
    elapsed = time.perf_counter() - started
    failed = int(_scalar("SELECT count(*) FROM memory_evidence WHERE namespace_id = %s AND"
                         " state = 'failed'", [ns.pk]))
    if failed:
        raise RuntimeError(f"{failed} observations failed (see {stack.logs})")
    return elapsed


def _committed_facts(namespace_id: int) -> int:
    return int(_scalar("SELECT count(*) FROM memory_operation WHERE namespace_id = %s AND"
                       " type <> 'reinstate'", [namespace_id]))


def _api_and_stream(perf: Perf, services_seconds: float) -> None:
    from django.test import override_settings

    from bench.runners import _audit
    from bench.scenarios import factconsolidation as fc

    scale = SCALES[perf.scale]
    patterns = perf.out / "perf-factconsolidation-patterns.json"
    patterns.write_text(json.dumps(fc.rule_pattern_entries(), indent=1))
    stack = Stack(perf, patterns).start()
    try:
        ns = _namespace(perf, "api")
        n = scale.ingest_observations
        keys = n * FACTS_PER_OBSERVATION // 2
        lsn = _wal_lsn()
        elapsed = _post_all(stack, ns, [
            {"facts": _facts("fact", i * 30, keys, i), "source": "perf"} for i in range(n)], perf)
        elapsed += _flush(ns)  # what the worker left outside the frontier index
        wal = _wal_since(lsn)
        facts = n * FACTS_PER_OBSERVATION
        rate = facts / elapsed
        perf.add("ingest", "API+worker facts/s", rate, "facts/s", goal=GOALS["api_facts_per_s"],
                 met=rate >= GOALS["api_facts_per_s"])
        perf.add("ingest", "API+worker WAL bytes per fact", wal / facts, "B")
        perf.add("ingest", "API+worker / services time ratio", elapsed / services_seconds, "x")
        perf.add("memory", "web RSS peak during API ingest", stack.peak["web"] / 2**20, "MiB")
        perf.add("memory", "worker RSS peak during API ingest (all processes)",
                 stack.peak["worker"] / 2**20, "MiB")

        perf.next_stage(f"scale run: {scale.stream_facts} FactConsolidation facts via API+worker")
        stream = fc.make_stream(scale.stream_facts, 10)
        pieces = [p for p in fc.chunks(stream) if p.strip()]
        stack.reset_peaks()
        ns = _namespace(perf, "stream-api")
        elapsed = _post_all(stack, ns, [{"text": p, "source": "perf:fc"} for p in pieces], perf)
        elapsed += _flush(ns)
        committed = _committed_facts(ns.pk)
        perf.add("scale", "stream facts", len(stream.facts), observations=len(pieces))
        perf.add("scale", "stream via API+worker seconds", elapsed, "s",
                 goal=GOALS["stream_seconds"], met=elapsed <= GOALS["stream_seconds"])
        perf.add("scale", "stream via API+worker facts/s", committed / elapsed, "facts/s")
        perf.add("scale", "stream operations committed", committed)
        audit = _audit(ns, stream)
        perf.add("scale", "stream gold_in_keyed_head (API+worker)", audit["gold_in_keyed_head"],
                 "%")
        perf.add("memory", "web RSS peak during scale run", stack.peak["web"] / 2**20, "MiB")
        perf.add("memory", "worker RSS peak during scale run (all processes)",
                 stack.peak["worker"] / 2**20, "MiB")
        perf.add("memory", "worker RSS peak during scale run (largest process)",
                 stack.peak["worker_max_process"] / 2**20, "MiB")
    finally:
        stack.stop()

    perf.say("scale run: the same stream in-process (services + rule extractor)")
    from memory.services import observation_ingest

    ns = _namespace(perf, "stream-services")
    with override_settings(PMEM_RULE_PATTERNS=str(patterns)):
        started = time.perf_counter()
        for i, piece in enumerate(pieces):
            observation_ingest(namespace=ns, text=piece, source="perf:fc")
            if i % 20 == 0:
                perf.progress(perf.stage - 1, perf.stages)
        elapsed = time.perf_counter() - started + _flush(ns)
    perf.add("scale", "stream via services seconds", elapsed, "s",
             goal=GOALS["stream_seconds"], met=elapsed <= GOALS["stream_seconds"])
    perf.add("scale", "stream via services facts/s", _committed_facts(ns.pk) / elapsed, "facts/s")

    from memory.services import observations_ingest

    ns = _namespace(perf, "stream-import")
    with override_settings(PMEM_RULE_PATTERNS=str(patterns)):
        started = time.perf_counter()
        for first in range(0, len(pieces), 100):
            observations_ingest(namespace=ns, observations=[
                {"text": p, "source": "perf:fc"} for p in pieces[first:first + 100]])
            perf.progress(perf.stage - 1, perf.stages)
        elapsed = time.perf_counter() - started + _flush(ns)
    perf.add("scale", "stream via services, group commit, seconds", elapsed, "s",
             goal=GOALS["stream_seconds"], met=elapsed <= GOALS["stream_seconds"])
    audit = _audit(ns, stream)
    perf.add("scale", "stream gold_in_keyed_head (group commit)", audit["gold_in_keyed_head"], "%")


# --- 3. growth, and reads at 1x and 40x history ------------------------------------------------


def _db_bytes() -> int:
    return int(_scalar(
        "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n"
        " ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r'"
        " AND c.relname LIKE 'memory\\_%%'"))


def _read_probe(ns: Any, keys: list[str], queries: list[str]) -> dict[str, float]:
    """Latency and statements of the point read, the full cell and the frontier read."""
    from memory.selectors import cell_detail, cell_value, frontier_read

    out: dict[str, float] = {}
    for name, call in (
        ("cell_value", lambda i: cell_value(namespace=ns, key=keys[i % len(keys)])),
        ("cell_detail", lambda i: cell_detail(namespace=ns, key=keys[i % len(keys)])),
        ("frontier_read", lambda i: frontier_read(namespace=ns, query=queries[i % len(queries)],
                                                  k=TOP_K)),
    ):
        call(0)
        times = []
        counter = StatementCounter()
        with counter.on():
            for i in range(60 if name != "frontier_read" else 40):
                t = time.perf_counter()
                call(i)
                times.append(time.perf_counter() - t)
        p50, p95 = _ms(times)
        out[f"{name}_p50_ms"], out[f"{name}_p95_ms"] = p50, p95
        out[f"{name}_statements"] = counter.n / len(times)
    return out


def _growth(perf: Perf) -> None:
    from memory.services import observation_ingest

    scale = SCALES[perf.scale]
    ceiling = scale.growth_versions
    cells = max(ceiling // 40, FACTS_PER_OBSERVATION)
    ns = _namespace(perf, "growth")
    keys = [f"entity_{i}_attr" for i in range(cells)]
    queries = [f"entity {i} attr" for i in range(0, cells, max(1, cells // 40))]
    checkpoints = sorted({c for c in (1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000,
                                      200_000, 500_000, 1_000_000) if c < ceiling} | {ceiling})
    written = 0
    obs = 0
    base_bytes = _db_bytes()
    counter = StatementCounter()
    seg_started, seg_facts, seg_statements = time.perf_counter(), 0, 0
    reads: dict[str, dict[str, float]] = {}
    series: list[dict[str, Any]] = []
    started = time.perf_counter()
    stopped = False
    with counter.on():
        while written < ceiling:
            if time.perf_counter() - started > scale.growth_budget_s and "1x" in reads:
                stopped = True  # the time budget, not the ceiling, bounds this run
                checkpoints = [written]
            first = (obs * FACTS_PER_OBSERVATION) % cells
            round_ = obs * FACTS_PER_OBSERVATION // cells
            observation_ingest(namespace=ns, facts=[
                {"key": keys[(first + j) % cells], "value": f"value {round_} of entity"
                 f" {(first + j) % cells}"} for j in range(FACTS_PER_OBSERVATION)])
            obs += 1
            written += FACTS_PER_OBSERVATION
            seg_facts += FACTS_PER_OBSERVATION
            if written >= cells and "1x" not in reads:  # every cell holds one version
                seg_elapsed, paused = time.perf_counter() - seg_started, counter.n
                reads["1x"] = _read_probe(ns, keys, queries)  # not part of the ingest series
                counter.n, seg_started = paused, time.perf_counter() - seg_elapsed
            if checkpoints and written >= checkpoints[0]:
                now = time.perf_counter()
                size = _db_bytes() - base_bytes
                series.append({"versions": written, "facts_per_s": seg_facts / (now - seg_started),
                               "db_bytes_per_fact": size / written,
                               "statements_per_fact": (counter.n - seg_statements) / seg_facts})
                perf.say(f"growth: {written} versions, {series[-1]['facts_per_s']:.0f} facts/s,"
                         f" {size / written:.0f} B/fact")
                while checkpoints and written >= checkpoints[0]:
                    checkpoints.pop(0)
                seg_started, seg_facts, seg_statements = time.perf_counter(), 0, counter.n
            if obs % 10 == 0:
                perf.progress(perf.stage - 1, perf.stages)
            if stopped:
                break
    total = time.perf_counter() - started
    reads["40x"] = _read_probe(ns, keys, queries)
    if stopped:
        perf.add("growth", "stopped by the time budget at versions", written, "",
                 budget_s=scale.growth_budget_s, ceiling=ceiling)
    perf.add("reads", "frontier_read plan at the end of growth", _frontier_plan(ns),
             cells=cells)
    perf.series["growth"] = series
    perf.add("growth", "versions written", written, cells=cells, seconds=round(total, 1))
    for point in series:
        perf.add("growth", "facts/s", point["facts_per_s"], "facts/s", versions=point["versions"])
        perf.add("growth", "database bytes per fact", point["db_bytes_per_fact"], "B",
                 versions=point["versions"])
        perf.add("growth", "statements per fact", point["statements_per_fact"],
                 versions=point["versions"])
    first, last = series[0]["facts_per_s"], series[-1]["facts_per_s"]
    perf.add("growth", f"ingest rate at {series[-1]['versions']} / at {series[0]['versions']}",
             last / first, "x")
    for name in ("cell_value", "cell_detail", "frontier_read"):
        for q in ("p50_ms", "p95_ms", "statements"):
            a, b = reads["1x"][f"{name}_{q}"], reads["40x"][f"{name}_{q}"]
            perf.add("reads", f"{name} {q.replace('_ms', '')} 1x -> 40x history", b,
                     "ms" if q != "statements" else "", at_1x=round(a, 3),
                     ratio=round(b / a, 2) if a else None, cells=cells)
    perf.series["history"] = [{"history": h, **reads[h]} for h in ("1x", "40x")]
    perf.growth_ns = ns  # type: ignore[attr-defined]
    perf.growth_keys = keys  # type: ignore[attr-defined]


def _frontier_plan(ns: Any) -> str:
    """Which scan the planner picks for the real frontier read of ``ns``."""
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    from memory.selectors import frontier_read

    with CaptureQueriesContext(connection) as captured:
        frontier_read(namespace=ns, query="entity 1 attr", k=TOP_K)
    search = next(q["sql"] for q in captured.captured_queries if "<=>" in q["sql"])
    with transaction.atomic(), _cursor() as cur:
        cur.execute("SET LOCAL hnsw.iterative_scan = 'relaxed_order'")
        cur.execute("EXPLAIN " + search)
        plan = "\n".join(r[0] for r in cur.fetchall())
    return "hnsw index scan" if "hnsw" in plan else "exact (read the namespace, sort)"


# --- 4. reads: point read vs bare SELECT; HNSW vs exact -----------------------------------------


def _point_read(perf: Perf) -> None:
    from memory.selectors import cell_detail, cell_value

    ns, keys = perf.growth_ns, perf.growth_keys  # type: ignore[attr-defined]
    head_ids = [int(_scalar("SELECT head_id FROM memory_cell WHERE namespace_id = %s AND key = %s",
                            [ns.pk, k])) for k in keys[:50]]
    bare, value, detail = [], [], []
    with _cursor() as cur:
        for i in range(1500):
            t = time.perf_counter()
            cur.execute("SELECT value FROM memory_version WHERE id = %s", [head_ids[i % 50]])
            cur.fetchone()
            bare.append(time.perf_counter() - t)
            t = time.perf_counter()
            cell_value(namespace=ns, key=keys[i % 50])
            value.append(time.perf_counter() - t)
            if i % 5 == 0:
                t = time.perf_counter()
                cell_detail(namespace=ns, key=keys[i % 50])
                detail.append(time.perf_counter() - t)
    b50, b95 = _ms(bare)
    v50, v95 = _ms(value)
    d50, _ = _ms(detail)
    perf.add("reads", "bare PK SELECT p50", b50, "ms", p95=round(b95, 3))
    perf.add("reads", "cell_value p50", v50, "ms", p95=round(v95, 3))
    perf.add("reads", "cell_detail p50 (40 versions of history)", d50, "ms")
    ratio = v50 / b50
    perf.add("reads", "point read / bare SELECT (p50)", ratio, "x",
             goal=GOALS["point_read_ratio"], met=ratio <= GOALS["point_read_ratio"])
    perf.add("reads", "cell_detail / bare SELECT (p50)", d50 / b50, "x")


def _corpus(n: int) -> tuple[Any, list[str]]:
    """``n`` cell texts (``key: value``, FactConsolidation-like), their vectors (float32), and
    question-like query texts that name one of the keys."""
    import numpy as np

    from bench.scenarios import factconsolidation as fc
    from memory.llm.embedding import HashingEmbedder

    rels = [r.name for r in fc.RELATIONS]
    texts = [f"person_{i // len(rels)}_{rels[i % len(rels)]}: value {i * 7919 % 100_003}"
             for i in range(n)]
    embedder = HashingEmbedder()
    vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
    queries = [f"what is the {rels[i % len(rels)].replace('_', ' ')} of person {i * 37 % (n // len(rels))}"
               for i in range(200)]
    return vectors, queries


def _load_scratch(table: str, vectors: Any) -> None:
    from django.db import connection

    with _cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {table}")
        cur.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, namespace_id bigint,"
                    f" embedding vector({vectors.shape[1]}))")
    with connection.cursor() as cur, cur.connection.cursor().copy(
            f"COPY {table} (id, namespace_id, embedding) FROM STDIN") as cp:
        for i, vec in enumerate(vectors):
            cp.write_row((i + 1, 1, _vector_literal(vec)))
    with _cursor() as cur:
        cur.execute(f"ANALYZE {table}")


def _build_index(table: str, m: int, efc: int, halfvec: bool = False) -> float:
    with _cursor() as cur:
        cur.execute(f"DROP INDEX IF EXISTS {table}_hnsw")
        cur.execute("SET maintenance_work_mem = '512MB'")
        started = time.perf_counter()
        expr = "(embedding::halfvec(384)) halfvec_cosine_ops" if halfvec else \
            "embedding vector_cosine_ops"
        cur.execute(f"CREATE INDEX {table}_hnsw ON {table} USING hnsw ({expr})"
                    f" WITH (m = {m}, ef_construction = {efc})")
        return time.perf_counter() - started


def _search(table: str, qvecs: list[str], *, exact: bool, ef: int = 100,
            halfvec: bool = False) -> tuple[list[list[tuple[int, float]]], list[float]]:
    """Top-12 ids per query, the frontier read's shape (namespace filter, iterative scan)."""
    from django.db import transaction

    order = "embedding::halfvec(384) <=> %s::halfvec(384)" if halfvec else \
        "embedding <=> %s::vector"
    dist = order.replace(" <=> %s", " <=> %(q)s")
    sql = (f"SELECT id, {dist} FROM {table} WHERE namespace_id = 1"
           f" ORDER BY {order.replace('%s', '%(q)s')} LIMIT {TOP_K}")
    results, times = [], []
    with transaction.atomic(), _cursor() as cur:
        if exact:
            cur.execute("SET LOCAL enable_indexscan = off")
        cur.execute(f"SET LOCAL hnsw.ef_search = {ef}")
        cur.execute("SET LOCAL hnsw.iterative_scan = 'relaxed_order'")
        for q in qvecs:
            t = time.perf_counter()
            cur.execute(sql, {"q": q})
            rows = cur.fetchall()
            times.append(time.perf_counter() - t)
            results.append([(r[0], float(r[1])) for r in rows])
    return results, times


def _insert_cost(table: str, probe: Any, size: int) -> float:
    """Milliseconds per row to insert ``probe`` into the built index with one
    ``INSERT ... SELECT`` (what a frontier flush pays per cell); deleted again afterwards."""
    stage = f"{table}_probe"
    _load_scratch(stage, probe)
    with _cursor() as cur:
        started = time.perf_counter()
        cur.execute(f"INSERT INTO {table} (id, namespace_id, embedding)"
                    f" SELECT id + %s, namespace_id, embedding FROM {stage}", [size])
        elapsed = time.perf_counter() - started
        cur.execute(f"DROP TABLE {stage}")
        cur.execute(f"DELETE FROM {table} WHERE id > %s", [size])
        cur.execute(f"VACUUM {table}")
    return 1000 * elapsed / max(1, len(probe))


def _recall(found: list[list[tuple[int, float]]], truth: list[list[tuple[int, float]]]) -> float:
    """Tie-aware recall@k: a returned cell counts when it is at least as close as the exact
    scan's k-th (the hashing embedder gives many equal distances, and which of several tied
    cells an exact scan lists is arbitrary)."""
    def one(f: list[tuple[int, float]], t: list[tuple[int, float]]) -> float:
        if not t:
            return 1.0
        kth = t[-1][1] + 1e-4  # halfvec distances are rounded
        return min(sum(1 for _, d in f if d <= kth), len(t)) / len(t)
    return statistics.mean(one(f, t) for f, t in zip(found, truth, strict=True))


def _frontier(perf: Perf) -> None:
    from memory.llm.embedding import HashingEmbedder
    from memory.selectors import FRONTIER_EF_SEARCH

    scale = SCALES[perf.scale]
    rows: list[dict[str, Any]] = []
    for size in scale.frontier_sizes:
        perf.say(f"frontier: {size} cells (load, exact scan, HNSW builds)")
        vectors, queries = _corpus(size + INSERT_PROBE)
        qvecs = [_vector_literal(v) for v in HashingEmbedder().embed(queries[:scale.queries])]
        table = f"perf_frontier_{size}"
        _load_scratch(table, vectors[:size])
        probe = vectors[size:]
        del vectors
        exact_q = qvecs if size < 1_000_000 else qvecs[:50]
        truth, exact_times = _search(table, exact_q, exact=True)
        e50, e95 = _ms(exact_times)
        rows.append({"cells": size, "config": "exact scan", "p50_ms": e50, "p95_ms": e95,
                     "recall": 1.0})
        # every configuration at the smallest size; the default and a denser graph beyond
        grid = scale.grid if size == scale.frontier_sizes[0] else ((16, 64), (24, 64))
        for m, efc in grid:
            build = _build_index(table, m, efc)
            for ef in EF_SEARCH:
                _search(table, qvecs[:10], exact=False, ef=ef)  # warm
                found, times = _search(table, exact_q, exact=False, ef=ef)
                p50, p95 = _ms(times)
                rows.append({"cells": size, "config": f"vector m={m} efc={efc} ef={ef}",
                             "m": m, "ef_construction": efc, "ef_search": ef, "p50_ms": p50,
                             "p95_ms": p95, "recall": _recall(found, truth),
                             "build_s": round(build, 1)})
            insert_ms = _insert_cost(table, probe, size)
            for r in rows:
                if r["cells"] == size and r.get("m") == m and r.get("ef_construction") == efc:
                    r["insert_ms"] = round(insert_ms, 3)
            perf.progress(perf.stage - 1, perf.stages)
        build = _build_index(table, 16, 64, halfvec=True)
        for ef in (40, 100):
            found, times = _search(table, exact_q, exact=False, ef=ef, halfvec=True)
            p50, p95 = _ms(times)
            rows.append({"cells": size, "config": f"halfvec m=16 efc=64 ef={ef}", "m": 16,
                         "ef_construction": 64, "ef_search": ef, "p50_ms": p50, "p95_ms": p95,
                         "recall": _recall(found, truth), "build_s": round(build, 1),
                         "halfvec": True})
        size_mb = int(_scalar(f"SELECT pg_relation_size('{table}_hnsw')")) / 2**20
        with _cursor() as cur:
            cur.execute(f"DROP TABLE {table}")
        rows[-1]["index_mib"] = round(size_mb, 1)
    perf.series["frontier"] = rows
    for r in rows:
        extra = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()
                 if k not in ("p95_ms",)}
        goal = {}
        if r["cells"] == 100_000 and r.get("ef_search") == FRONTIER_EF_SEARCH and \
                r["config"].startswith("vector m=16 efc=64"):
            goal = {"goal": GOALS["frontier_p95_ms_100k"],
                    "met": r["p95_ms"] <= GOALS["frontier_p95_ms_100k"]
                    and r["recall"] >= GOALS["recall_at_12"]}
        perf.add("frontier", f"top-12 p95 {r['config']} @ {r['cells']}", r["p95_ms"], "ms",
                 **extra, **goal)


# --- 5. rollback ------------------------------------------------------------------------------


def _rollback(perf: Perf) -> None:
    from memory.domain import OpType
    from memory.services import observation_ingest, operation_apply

    scale = SCALES[perf.scale]
    ns = _namespace(perf, "rollback")
    revokes = 30
    for start in range(0, scale.chain, FACTS_PER_OBSERVATION):  # one key, 1,000 versions
        observation_ingest(namespace=ns, facts=[
            {"key": "chain_long", "value": f"value {i}"}
            for i in range(start, min(start + FACTS_PER_OBSERVATION, scale.chain))])
    for start in range(0, revokes + 2, 15):  # 32 keys of 2 versions each
        batch = range(start, min(start + 15, revokes + 2))
        observation_ingest(namespace=ns, facts=[
            {"key": f"chain_short_{k}", "value": f"first {k}"} for k in batch])
        observation_ingest(namespace=ns, facts=[
            {"key": f"chain_short_{k}", "value": f"second {k}"} for k in batch])
    long_t, short_t = [], []
    long_n, short_n = StatementCounter(), StatementCounter()
    for i in range(revokes):  # interleaved, so load drifts hit both alike
        with long_n.on():
            t = time.perf_counter()
            operation_apply(namespace=ns, key="chain_long", op=OpType.REVOKE, actor="user:perf",
                            explicit=True)
            long_t.append(time.perf_counter() - t)
        with short_n.on():
            t = time.perf_counter()
            operation_apply(namespace=ns, key=f"chain_short_{i}", op=OpType.REVOKE,
                            actor="user:perf", explicit=True)
            short_t.append(time.perf_counter() - t)
    l50, l95 = _ms(long_t)
    s50, s95 = _ms(short_t)
    perf.add("rollback", f"revoke p50 on a {scale.chain}-version chain", l50, "ms",
             p95=round(l95, 3), statements=long_n.n / revokes)
    perf.add("rollback", "revoke p50 on a 2-version chain", s50, "ms", p95=round(s95, 3),
             statements=short_n.n / revokes)
    ratio = l50 / s50
    perf.add("rollback", "long / short chain revoke (p50)", ratio, "x",
             goal=GOALS["rollback_ratio"], met=ratio <= GOALS["rollback_ratio"])


# --- the runner and its report ------------------------------------------------------------------


def run(config: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    scale = getattr(config, "scale", None) or "medium"
    perf = Perf(scale=scale, run_id=config.run_id[-6:], out=Path(config.out),
                progress=config.progress)
    perf.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    only = getattr(config, "only", None)  # "graph": that section alone
    perf.stages = 1 if only else perf.stages + 1
    if not only:
        perf.next_stage("ingest through the services (observations of 30 facts)")
        services = _ingest_services(perf)
        perf.next_stage("COPY floor")
        _copy_floor(perf, services)
        perf.next_stage("ingest through API (gunicorn) + Celery worker")
        _api_and_stream(perf, services)
        perf.next_stage(f"growth to {SCALES[scale].growth_versions} versions, reads at 1x/40x")
        _growth(perf)
        _point_read(perf)
        perf.next_stage("rollback on a long vs a short chain")
        _rollback(perf)
        perf.next_stage("frontier top-12: HNSW vs exact scan")
        _frontier(perf)
    from bench.perf_graph import graph_memory

    perf.next_stage("graph memory: one cell's graph through gunicorn, peak worker RSS")
    graph_memory(perf, getattr(config, "baseline", None))
    perf.progress(perf.stages, perf.stages)
    from django.db import connection

    config_out = {
        "run_id": config.run_id, "scale": scale, "scale_params": SCALES[scale].__dict__,
        "goals": GOALS, "seconds": round(time.perf_counter() - started, 1),
        "machine": {"cpus": os.cpu_count(), "load_avg": os.getloadavg()},
        "postgres": str(_scalar("SHOW server_version")),
        "pgvector": str(_scalar("SELECT extversion FROM pg_extension WHERE extname = 'vector'")),
        "database": connection.settings_dict["NAME"], "series": perf.series,
    }
    return config_out, perf.rows


def write(out: Path, config: dict[str, Any], results: list[dict[str, Any]]) -> str:
    """perf.json, perf.md (goals first, then every figure) and perf.png."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "perf.json").write_text(json.dumps({"scenario": NAME, "config": config,
                                               "results": results}, indent=1, default=str))
    table = markdown(config, results)
    (out / "perf.md").write_text(table)
    plot(out / "perf.png", config, results)
    if config.get("series", {}).get("graph_memory"):
        from bench.perf_graph import plot as plot_graph_memory

        plot_graph_memory(out / "perf-graph-memory.png", config["series"]["graph_memory"])
    return table


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return "—" if value is None else str(value)


def markdown(config: dict[str, Any], results: list[dict[str, Any]]) -> str:
    load = config.get("machine", {}).get("load_avg")
    lines = [f"## perf (scale {config.get('scale')})", "",
             f"PostgreSQL {config.get('postgres')}, pgvector {config.get('pgvector')}; "
             f"{config.get('machine', {}).get('cpus')} CPUs, load average at the end {load}; "
             f"run took {config.get('seconds')} s. Ratios are measured side by side in this run.",
             "", "### Goals", "", "| measure | value | goal | met |", "|---|---|---|---|"]
    for r in results:
        if "goal" in r:
            lines.append(f"| {r['section']}: {r['metric']} | {_fmt(r['value'])} {r['unit']} | "
                         f"{_fmt(r['goal'])} | {'yes' if r['met'] else '**no**'} |")
    lines += ["", "### Every figure", "", "| section | measure | value | unit | details |",
              "|---|---|---|---|---|"]
    for r in results:
        details = ", ".join(f"{k}={_fmt(v)}" for k, v in r.items()
                            if k not in ("section", "metric", "value", "unit", "goal", "met"))
        lines.append(f"| {r['section']} | {r['metric']} | {_fmt(r['value'])} | {r['unit']} | "
                     f"{details} |")
    return "\n".join(lines) + "\n"


def plot(path: Path, config: dict[str, Any], results: list[dict[str, Any]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = config.get("series", {})
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    growth = series.get("growth", [])
    ax = axes[0][0]
    if growth:
        xs = [g["versions"] for g in growth]
        ax.plot(xs, [g["facts_per_s"] for g in growth], marker="o", label="services facts/s")
        ax.set_xscale("log")
        ax.set_xlabel("versions in the namespace")
        ax.set_ylabel("facts/s (segment)")
        ax2 = ax.twinx()
        ax2.plot(xs, [g["statements_per_fact"] for g in growth], marker="s", color="tab:green",
                 label="statements/fact")
        ax2.set_ylabel("statements per fact")
        ax.legend(loc="lower left", fontsize=8)
        ax2.legend(loc="lower right", fontsize=8)
    ax.set_title("ingest rate as history grows")
    ax = axes[0][1]
    if growth:
        ax.plot([g["versions"] for g in growth], [g["db_bytes_per_fact"] for g in growth],
                marker="o")
        ax.set_xscale("log")
        ax.set_xlabel("versions in the namespace")
        ax.set_ylabel("database bytes per fact")
    ax.set_title("database size per fact")
    ax = axes[1][0]
    frontier = series.get("frontier", [])
    for cells in dict.fromkeys(r["cells"] for r in frontier):
        for m, style in ((16, "-"), (24, "--")):
            rows = [r for r in frontier if r["cells"] == cells and "ef_search" in r
                    and not r.get("halfvec") and r.get("m") == m
                    and r.get("ef_construction") == 64]
            if rows:
                ax.plot([r["recall"] for r in rows], [r["p95_ms"] for r in rows], marker="o",
                        linestyle=style,
                        label=f"{cells:,} cells m={m} (ef_search "
                              f"{', '.join(str(r['ef_search']) for r in rows)})")
        exact = [r for r in frontier if r["cells"] == cells and r["config"] == "exact scan"]
        if exact:
            ax.axhline(exact[0]["p95_ms"], linestyle=":", color="grey")
    ax.axhline(GOALS["frontier_p95_ms_100k"], color="red", linewidth=0.8, label="20 ms goal")
    ax.set_yscale("log")
    ax.set_xlabel("recall@12 vs exact scan")
    ax.set_ylabel("p95 ms (dotted: exact scan)")
    ax.legend(fontsize=7)
    ax.set_title("frontier top-12, HNSW efc=64 (dashed: m=24)")
    ax = axes[1][1]
    by = {r["metric"]: r["value"] for r in results}
    bars = [(label, by.get(metric)) for label, metric in (
        ("services\n(1/call)", "services facts/s (one observation per call, incl. index flush)"),
        ("services\n(group)", "services facts/s (group commit, incl. index flush)"),
        ("API+worker", "API+worker facts/s"),
        ("COPY/obs", "COPY floor facts/s (COPY+COMMIT per 30 rows)"),
        ("COPY", "COPY floor facts/s (one COPY)"))]
    bars = [(label, v) for label, v in bars if v]
    ax.bar([b[0] for b in bars], [b[1] for b in bars], color="tab:blue")
    ax.set_yscale("log")
    ax.set_ylabel("facts (rows) per second")
    ax.set_title("ingest vs the COPY floor")
    fig.suptitle(f"P-Mem perf, scale {config.get('scale')}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
