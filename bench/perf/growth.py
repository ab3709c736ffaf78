"""One namespace grown from 1k versions to the scale's ceiling: ingest rate, bytes and
statements per fact, and the reads at 1x and 40x history; the point read against a bare
primary-key SELECT."""

from __future__ import annotations

import time
from typing import Any

from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from memory.selectors.cells import cell_detail, cell_value
from memory.selectors.search import frontier_read
from memory.services import observation_ingest

from .common import (
    FACTS_PER_OBSERVATION,
    GOALS,
    SCALES,
    TOP_K,
    Perf,
    StatementCounter,
    cursor,
    ms,
    new_namespace,
    scalar,
)


def db_bytes() -> int:
    return int(scalar(
        "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n"
        " ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r'"
        " AND c.relname LIKE 'memory\\_%%'"))


def read_probe(ns: Any, keys: list[str], queries: list[str]) -> dict[str, float]:
    """Latency and statements of the point read, the full cell and the frontier read."""
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
        p50, p95 = ms(times)
        out[f"{name}_p50_ms"], out[f"{name}_p95_ms"] = p50, p95
        out[f"{name}_statements"] = counter.n / len(times)
    return out


def growth(perf: Perf) -> None:
    scale = SCALES[perf.scale]
    ceiling = scale.growth_versions
    cells = max(ceiling // 40, FACTS_PER_OBSERVATION)
    ns = new_namespace(perf, "growth")
    keys = [f"entity_{i}_attr" for i in range(cells)]
    queries = [f"entity {i} attr" for i in range(0, cells, max(1, cells // 40))]
    checkpoints = sorted({c for c in (1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000,
                                      200_000, 500_000, 1_000_000) if c < ceiling} | {ceiling})
    written = 0
    obs = 0
    base_bytes = db_bytes()
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
                reads["1x"] = read_probe(ns, keys, queries)  # not part of the ingest series
                counter.n, seg_started = paused, time.perf_counter() - seg_elapsed
            if checkpoints and written >= checkpoints[0]:
                now = time.perf_counter()
                size = db_bytes() - base_bytes
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
    reads["40x"] = read_probe(ns, keys, queries)
    if stopped:
        perf.add("growth", "stopped by the time budget at versions", written, "",
                 budget_s=scale.growth_budget_s, ceiling=ceiling)
    perf.add("reads", "frontier_read plan at the end of growth", frontier_plan(ns),
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
            perf.add("reads", f"{name} {q.replace('ms', '')} 1x -> 40x history", b,
                     "ms" if q != "statements" else "", at_1x=round(a, 3),
                     ratio=round(b / a, 2) if a else None, cells=cells)
    perf.series["history"] = [{"history": h, **reads[h]} for h in ("1x", "40x")]
    perf.growth_ns = ns  # type: ignore[attr-defined]
    perf.growth_keys = keys  # type: ignore[attr-defined]


def frontier_plan(ns: Any) -> str:
    """Which scan the planner picks for the real frontier read of ``ns``."""


    with CaptureQueriesContext(connection) as captured:
        frontier_read(namespace=ns, query="entity 1 attr", k=TOP_K)
    search = next(q["sql"] for q in captured.captured_queries if "<=>" in q["sql"])
    with transaction.atomic(), cursor() as cur:
        cur.execute("SET LOCAL hnsw.iterative_scan = 'relaxed_order'")
        cur.execute("EXPLAIN " + search)
        plan = "\n".join(r[0] for r in cur.fetchall())
    return "hnsw index scan" if "hnsw" in plan else "exact (read the namespace, sort)"


def point_read(perf: Perf) -> None:
    ns, keys = perf.growth_ns, perf.growth_keys  # type: ignore[attr-defined]
    head_ids = [int(scalar("SELECT head_id FROM memory_cell WHERE namespace_id = %s AND key = %s",
                            [ns.pk, k])) for k in keys[:50]]
    bare, value, detail = [], [], []
    with cursor() as cur:
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
    b50, b95 = ms(bare)
    v50, v95 = ms(value)
    d50, _ = ms(detail)
    perf.add("reads", "bare PK SELECT p50", b50, "ms", p95=round(b95, 3))
    perf.add("reads", "cell_value p50", v50, "ms", p95=round(v95, 3))
    perf.add("reads", "cell_detail p50 (40 versions of history)", d50, "ms")
    ratio = v50 / b50
    perf.add("reads", "point read / bare SELECT (p50)", ratio, "x",
             goal=GOALS["point_read_ratio"], met=ratio <= GOALS["point_read_ratio"])
    perf.add("reads", "cell_detail / bare SELECT (p50)", d50 / b50, "x")
