"""Frontier top-12 by HNSW on scratch tables against an exact scan: recall@12 and latency
over a grid of ``m`` / ``ef_construction`` / ``hnsw.ef_search``, halfvec, and the cost of one
HNSW insert (what a frontier flush pays per cell)."""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np
from django.db import connection, transaction

from bench.scenarios import factconsolidation as fc
from memory.llm.embedding import HashingEmbedder
from memory.selectors.search import FRONTIER_EF_SEARCH

from .common import (
    EF_SEARCH,
    GOALS,
    INSERT_PROBE,
    SCALES,
    TOP_K,
    Perf,
    cursor,
    ms,
    scalar,
    vector_literal,
)


def _corpus(n: int) -> tuple[Any, list[str]]:
    """``n`` cell texts (``key: value``, FactConsolidation-like), their vectors (float32), and
    question-like query texts that name one of the keys."""


    rels = [r.name for r in fc.RELATIONS]
    texts = [f"person_{i // len(rels)}_{rels[i % len(rels)]}: value {i * 7919 % 100_003}"
             for i in range(n)]
    embedder = HashingEmbedder()
    vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
    queries = [f"what is the {rels[i % len(rels)].replace('_', ' ')} of person {i * 37 % (n // len(rels))}"
               for i in range(200)]
    return vectors, queries


def _load_scratch(table: str, vectors: Any) -> None:
    with cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {table}")
        cur.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, namespace_id bigint,"
                    f" embedding vector({vectors.shape[1]}))")
    with connection.cursor() as cur, cur.connection.cursor().copy(
            f"COPY {table} (id, namespace_id, embedding) FROM STDIN") as cp:
        for i, vec in enumerate(vectors):
            cp.write_row((i + 1, 1, vector_literal(vec)))
    with cursor() as cur:
        cur.execute(f"ANALYZE {table}")


def _build_index(table: str, m: int, efc: int, halfvec: bool = False) -> float:
    with cursor() as cur:
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
    order = "embedding::halfvec(384) <=> %s::halfvec(384)" if halfvec else \
        "embedding <=> %s::vector"
    dist = order.replace(" <=> %s", " <=> %(q)s")
    sql = (f"SELECT id, {dist} FROM {table} WHERE namespace_id = 1"
           f" ORDER BY {order.replace('%s', '%(q)s')} LIMIT {TOP_K}")
    results, times = [], []
    with transaction.atomic(), cursor() as cur:
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
    with cursor() as cur:
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


def frontier(perf: Perf) -> None:
    scale = SCALES[perf.scale]
    rows: list[dict[str, Any]] = []
    for size in scale.frontier_sizes:
        perf.say(f"frontier: {size} cells (load, exact scan, HNSW builds)")
        vectors, queries = _corpus(size + INSERT_PROBE)
        qvecs = [vector_literal(v) for v in HashingEmbedder().embed(queries[:scale.queries])]
        table = f"perf_frontier_{size}"
        _load_scratch(table, vectors[:size])
        probe = vectors[size:]
        del vectors
        exact_q = qvecs if size < 1_000_000 else qvecs[:50]
        truth, exact_times = _search(table, exact_q, exact=True)
        e50, e95 = ms(exact_times)
        rows.append({"cells": size, "config": "exact scan", "p50_ms": e50, "p95_ms": e95,
                     "recall": 1.0})
        # every configuration at the smallest size; the default and a denser graph beyond
        grid = scale.grid if size == scale.frontier_sizes[0] else ((16, 64), (24, 64))
        for m, efc in grid:
            build = _build_index(table, m, efc)
            for ef in EF_SEARCH:
                _search(table, qvecs[:10], exact=False, ef=ef)  # warm
                found, times = _search(table, exact_q, exact=False, ef=ef)
                p50, p95 = ms(times)
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
            p50, p95 = ms(times)
            rows.append({"cells": size, "config": f"halfvec m=16 efc=64 ef={ef}", "m": 16,
                         "ef_construction": 64, "ef_search": ef, "p50_ms": p50, "p95_ms": p95,
                         "recall": _recall(found, truth), "build_s": round(build, 1),
                         "halfvec": True})
        size_mb = int(scalar(f"SELECT pg_relation_size('{table}_hnsw')")) / 2**20
        with cursor() as cur:
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
