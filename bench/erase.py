"""``pmem_bench erase``: the cost of a privacy erase (SPEC §6) as a key's history grows.

Two shapes of long key, each in a namespace of its own that also holds unrelated keys and
observations quoting some of the key's values (so the report has mentions to find):

- **bulk**: the key's versions arrive 500 facts per observation (an importer, a batch
  client): the evidence to redact is small, the versions, operations and edges to delete are
  many;
- **polled**: one observation per version (a status polled every minute): every version has
  an observation to redact, re-embed and rewrite — the cost that follows the evidence.

Each key is erased through :func:`memory.services.cell_erase` with ``report=True`` (the
``DELETE …?report=1`` path: the mention search included), timed end to end and per statement
(an execute wrapper groups the SQL by phase; the rest is Python), beside a 2-version key of
the same namespace erased the same way. The erase proper (what commits, holding the cell's
lock) and the report's mention search (every erased value, after the commit, within its time
budget: the values it did not reach are counted) are reported apart. Then :func:`memory.services.erase_followup` (what
runs after the request: re-embedding and the VACUUM) is timed on its own. Last, what the
mention indexes cost every write: rows inserted into two scratch copies of the version and
evidence tables, with and without the GIN index, side by side.

Writes ``erase.json``, ``erase.md`` and ``erase.png``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NAME = "erase"
PER_OBSERVATION = 500  # facts per observation in the bulk shape
GOAL_SECONDS = 5.0  # a 100,000-version key erases (commits) in at most this

SCALES = {  # versions per key, by shape
    "small": {"bulk": (1_000,), "polled": (300,)},
    "medium": {"bulk": (1_000, 10_000, 100_000), "polled": (1_000, 10_000)},
    "full": {"bulk": (1_000, 10_000, 100_000), "polled": (1_000, 10_000, 100_000)},
}

#: Statement signatures -> phase (the first that matches a statement's text).
PHASES = (
    ("redact: read", "e.extracted"), ("lock", "FOR UPDATE"), ("values", "GROUP BY value"),
    ("redact: write", "UPDATE memory_evidence AS e SET text"), ("delete", "DELETE FROM"),
    ("mentions", "needles AS"), ("re-embed", "SET embedding"),
)


@dataclass
class Timed:
    """SQL time by phase, from an execute wrapper around one erase."""

    phases: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    statements: int = 0
    #: statements of the mention search (one per MENTION_BATCH values, each in a savepoint)
    mention_batches: int = 0

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.statements += 1
            phase = next((name for name, mark in PHASES if mark in sql), "other")
            self.mention_batches += phase == "mentions"
            self.phases[phase] += time.perf_counter() - started

    @contextmanager
    def on(self) -> Iterator[Timed]:
        from django.db import connection

        with connection.execute_wrapper(self):
            yield self


def _say(text: str) -> None:
    sys.stderr.write(f"erase: {text}\n")
    sys.stderr.flush()


def _namespace(run_id: str, label: str) -> Any:
    from memory.services import namespace_create

    return namespace_create(name=f"bench-erase-{label}-{run_id}")


def _build(ns: Any, key: str, versions: int, shape: str) -> float:
    """The key's history, plus unrelated keys and observations quoting some of its values
    (one in a hundred). Returns the ingest rate (facts/s) as a by-product."""
    from memory.services import observations_ingest

    per = PER_OBSERVATION if shape == "bulk" else 1
    started = time.perf_counter()
    done = 0
    batch = max(per, 1000)
    while done < versions:
        chunk = range(done, min(versions, done + batch))
        observations = [
            {"text": f"{key} poll {o}", "source": "poller",
             "facts": [{"key": key, "value": f"state {i}"} for i in chunk[o:o + per]]}
            for o in range(0, len(chunk), per)]
        observations += [{"text": f"note: state {i} was seen", "source": "notes",
                          "facts": [{"key": f"other_{i % 37}", "value": f"thing {i}"}]}
                         for i in chunk[::100]]
        observations_ingest(namespace=ns, observations=observations, actor="api:bench")
        done += len(chunk)
    return versions / (time.perf_counter() - started)


def _erase(ns: Any, key: str) -> dict[str, Any]:
    from memory.services import cell_erase

    timed = Timed()
    with timed.on():
        started = time.perf_counter()
        erased = cell_erase(namespace=ns, key=key, actor="user:bench", report=True)
        seconds = time.perf_counter() - started
    sql = sum(timed.phases.values())
    # The report's mention search runs after the erase committed (no lock held): the erase
    # proper is the rest.
    search = timed.phases.get("mentions", 0.0)
    return {"seconds": round(seconds, 3), "statements": timed.statements,
            "erase_seconds": round(seconds - search, 3), "search_seconds": round(search, 3),
            "mention_batches": timed.mention_batches,
            "values_unsearched": erased.mentions.values_unsearched,
            "versions": erased.audit.versions_erased,
            "redacted_evidence": erased.redacted_evidence,
            "mentions": len(erased.mentions.items), "reembed_pending": erased.reembed_pending,
            "phases": {k: round(v, 3) for k, v in sorted(timed.phases.items())},
            "python_seconds": round(max(0.0, seconds - sql), 3)}


def _followup() -> dict[str, Any]:
    from memory.services import erase_followup

    started = time.perf_counter()
    total = {"reembedded": 0, "vacuumed": 0}
    while True:  # one call re-embeds a bounded batch; the task runs again until none is left
        done = erase_followup()
        total = {k: total[k] + done[k] for k in total}
        if not done["reembedded"]:
            break
    return {**total, "seconds": round(time.perf_counter() - started, 2)}


def _shape(run_id: str, shape: str, versions: int, progress: Callable[[str], None]
           ) -> dict[str, Any]:
    ns = _namespace(run_id, f"{shape}-{versions}")
    progress(f"{shape}: building a key of {versions:,} versions")
    rate = _build(ns, "status", versions, shape)
    _build(ns, "short_key", 2, "polled")
    with _cursor() as cur:  # the planner sees the namespace as it is, as in production
        cur.execute("ANALYZE memory_evidence, memory_version, memory_operation,"
                    " memory_supportedge, memory_cell")
    short = _erase(ns, "short_key")
    progress(f"{shape}: erasing {versions:,} versions")
    long = _erase(ns, "status")
    followup = _followup()
    return {"shape": shape, "versions": versions, "ingest_facts_per_s": round(rate, 1),
            **long, "short_seconds": short["seconds"], "short_statements": short["statements"],
            "short_mention_batches": short["mention_batches"],
            "vs_short": round(long["erase_seconds"] / max(short["erase_seconds"], 1e-6), 1),
            "followup": followup}


def _cursor() -> Any:
    from django.db import connection

    return connection.cursor()


def _index_cost(rows: int = 20_000) -> list[dict[str, Any]]:
    """What a mention index costs each written row: the same rows inserted into a scratch
    copy of the table with and without it (no other index), side by side, three rounds."""
    out = []
    cases = (
        ("version value", "value text, namespace_id bigint",
         "SELECT 'state ' || i, 1 FROM generate_series(1, %s) i",
         "pmem_tsv(namespace_id, value)"),
        ("evidence text", "text text, source text, namespace_id bigint",
         "SELECT 'status poll ' || i || ' of the poller, value state ' || i, 'poller', 1"
         " FROM generate_series(1, %s) i", "pmem_evidence_tsv(namespace_id, text, source)"),
    )
    with _cursor() as cur:
        for label, columns, rows_sql, expression in cases:
            timings: dict[str, list[float]] = {"without": [], "with": []}
            for _ in range(3):
                for variant in ("without", "with"):
                    cur.execute("DROP TABLE IF EXISTS perf_erase_scratch")
                    cur.execute(f"CREATE UNLOGGED TABLE perf_erase_scratch ({columns})")
                    if variant == "with":
                        cur.execute("CREATE INDEX ON perf_erase_scratch USING gin"
                                    f" ({expression}) WITH (gin_pending_list_limit = 64)")
                    started = time.perf_counter()
                    cur.execute(f"INSERT INTO perf_erase_scratch {rows_sql}", [rows])
                    timings[variant].append(time.perf_counter() - started)
            cur.execute("DROP TABLE IF EXISTS perf_erase_scratch")
            base, indexed = min(timings["without"]), min(timings["with"])
            out.append({"table": label, "rows": rows,
                        "us_per_row_without": round(1e6 * base / rows, 1),
                        "us_per_row_with": round(1e6 * indexed / rows, 1),
                        "index_us_per_row": round(1e6 * (indexed - base) / rows, 1)})
    return out


def run(config: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    scale = getattr(config, "scale", None) or "medium"
    run_id = config.run_id[-6:]
    steps = [(shape, n) for shape, sizes in SCALES[scale].items() for n in sizes]
    results: list[dict[str, Any]] = []
    started = time.perf_counter()
    for i, (shape, versions) in enumerate(steps):
        config.progress(i, len(steps) + 1)
        row = _shape(run_id, shape, versions, _say)
        if versions == 100_000:
            row["goal"], row["met"] = GOAL_SECONDS, row["erase_seconds"] <= GOAL_SECONDS
        results.append(row)
        _say(f"{shape} {versions:,}: {row['seconds']} s ({row['phases']})")
    config.progress(len(steps), len(steps) + 1)
    index_cost = _index_cost()
    config.progress(len(steps) + 1, len(steps) + 1)
    from django.db import connection

    with _cursor() as cur:
        cur.execute("SHOW server_version")
        version = cur.fetchone()[0]
        cur.execute("SELECT current_setting('is_superuser')")
        superuser = cur.fetchone()[0] == "on"
    run_config = {"run_id": config.run_id, "scale": scale, "sizes": SCALES[scale],
                  "seconds": round(time.perf_counter() - started, 1), "postgres": version,
                  "fk_triggers_skipped": superuser, "index_cost": index_cost,
                  "machine": {"cpus": os.cpu_count(), "load_avg": os.getloadavg()},
                  "database": connection.settings_dict["NAME"]}
    return run_config, results


def write(out: Path, config: dict[str, Any], results: list[dict[str, Any]]) -> str:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{NAME}.json").write_text(json.dumps({"scenario": NAME, "config": config,
                                                  "results": results}, indent=1, default=str))
    table = markdown(config, results)
    (out / f"{NAME}.md").write_text(table)
    plot(out / f"{NAME}.png", config, results)
    return table


def markdown(config: dict[str, Any], results: list[dict[str, Any]]) -> str:
    load = config.get("machine", {}).get("load_avg")
    lines = [f"## {NAME} (scale {config.get('scale')})", "",
             f"PostgreSQL {config.get('postgres')}; {config.get('machine', {}).get('cpus')} CPUs,"
             f" load average at the end {load}; foreign-key triggers skipped:"
             f" {config.get('fk_triggers_skipped')}; run took {config.get('seconds')} s.", "",
             "| shape | versions | evidence redacted | erase s (committed) | mention search s"
             " (values not reached) | vs 2-version key | statements | SQL by phase (s) | Python s"
             " | mentions | follow-up s (re-embedded) | goal |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        phases = ", ".join(f"{k} {v}" for k, v in r["phases"].items())
        goal = "" if "goal" not in r else ("met" if r["met"] else "**not met**") + \
            f" (≤ {r['goal']} s)"
        lines.append(
            f"| {r['shape']} | {r['versions']:,} | {r['redacted_evidence']:,} |"
            f" {r['erase_seconds']} | {r['search_seconds']} ({r['values_unsearched']:,}) |"
            f" {r['vs_short']}× | {r['statements']} (short: {r['short_statements']}) |"
            f" {phases} | {r['python_seconds']} | {r['mentions']} |"
            f" {r['followup']['seconds']} ({r['followup']['reembedded']:,}) | {goal} |")
    lines += ["", "What a mention index costs a written row (scratch tables, best of three):",
              "", "| table | µs/row without | µs/row with | index µs/row |", "|---|---|---|---|"]
    for c in config.get("index_cost", []):
        lines.append(f"| {c['table']} | {c['us_per_row_without']} | {c['us_per_row_with']} |"
                     f" {c['index_us_per_row']} |")
    return "\n".join(lines) + "\n"


def plot(path: Path, config: dict[str, Any], results: list[dict[str, Any]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    for shape, marker in (("bulk", "o"), ("polled", "s")):
        rows = [r for r in results if r["shape"] == shape]
        if rows:
            left.plot([r["versions"] for r in rows], [r["erase_seconds"] for r in rows],
                      marker=marker,
                      label=f"{shape} ({'500 facts' if shape == 'bulk' else '1 fact'} per obs.)")
            left.plot([r["versions"] for r in rows], [r["search_seconds"] for r in rows],
                      marker=marker, linestyle=":", alpha=0.7,
                      label=f"{shape}: the report's mention search, after the commit")
    left.axhline(GOAL_SECONDS, color="red", linewidth=0.8, label=f"{GOAL_SECONDS:g} s goal")
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("versions of the erased key")
    left.set_ylabel("seconds")
    left.set_title("erase time as the key grows")
    left.legend(fontsize=8)
    biggest = {r["shape"]: r for r in results}
    names = sorted({p for r in biggest.values() for p in r["phases"]} | {"python"})
    bottoms = [0.0] * len(biggest)
    labels = [f"{r['shape']}\n{r['versions']:,}" for r in biggest.values()]
    for name in names:
        heights = [r["python_seconds"] if name == "python" else r["phases"].get(name, 0.0)
                   for r in biggest.values()]
        right.bar(labels, heights, bottom=bottoms, label=name)
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    right.set_ylabel("seconds")
    right.set_title("where the largest erase of each shape goes")
    right.legend(fontsize=7)
    fig.suptitle(f"P-Mem privacy erase, scale {config.get('scale')}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
