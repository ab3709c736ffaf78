"""What every part of the perf suite shares: scales, goals, the run's collector, small SQL
and timing tools."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import connection

from memory.services import namespace_create
from memory.services.frontier import frontier_flush, frontier_flush_wait

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


def cursor() -> Any:
    return connection.cursor()


def scalar(sql: str, params: list[Any] | None = None) -> Any:
    with cursor() as cur:
        cur.execute(sql, params or [])
        return cur.fetchone()[0]


def wal_lsn() -> str:
    return str(scalar("SELECT pg_current_wal_insert_lsn()::text"))


def wal_since(lsn: str) -> int:
    return int(scalar("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %s::pg_lsn)", [lsn]))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def ms(values: list[float]) -> tuple[float, float]:
    return 1000 * pct(values, 0.5), 1000 * pct(values, 0.95)


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

        with connection.execute_wrapper(self):
            yield self


def fact_batch(prefix: str, first: int, keys: int, round_: int) -> list[dict[str, str]]:
    return [{"key": f"{prefix}_{(first + j) % keys}_attr",
             "value": f"value {round_} of {prefix} {(first + j) % keys}"}
            for j in range(FACTS_PER_OBSERVATION)]


def new_namespace(perf: Perf, part: str) -> Any:
    return namespace_create(name=f"perf-{perf.run_id}-{part}".lower()[:100])


def vector_literal(vector: Any) -> str:
    return "[" + ",".join(f"{x:.6g}" for x in vector) + "]"


def flush_index(ns: Any) -> float:
    """Index what the run left outside the frontier index (after the background indexer is
    done with what it was asked to flush); seconds it took."""
    started = time.perf_counter()
    frontier_flush_wait()
    frontier_flush(namespace_id=ns.pk)
    return time.perf_counter() - started
