"""Ingest through the services (one observation per call, and group commit) against the
floor: the same rows written by ``COPY``."""

from __future__ import annotations

import time

from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from memory.services import observation_ingest, observations_ingest

from .common import (
    FACTS_PER_OBSERVATION,
    GOALS,
    SCALES,
    Perf,
    cursor,
    fact_batch,
    flush_index,
    new_namespace,
    wal_lsn,
    wal_since,
)


def ingest_services(perf: Perf) -> float:


    scale = SCALES[perf.scale]
    ns = new_namespace(perf, "ingest")
    n = scale.ingest_observations
    keys = n * FACTS_PER_OBSERVATION // 2  # every key written twice: half new, half overwrite
    for i in range(3):  # warm caches and the embedder
        observation_ingest(namespace=ns, facts=fact_batch("warm", i * 30, 90, i))
    with CaptureQueriesContext(connection) as captured:
        for i in range(3, 6):
            observation_ingest(namespace=ns, facts=fact_batch("count", i * 30, 90, i))
    per_obs = len(captured.captured_queries) / 3
    lsn = wal_lsn()
    started = time.perf_counter()
    for i in range(n):
        observation_ingest(namespace=ns, facts=fact_batch("fact", i * 30, keys, i))
        if i % 10 == 0:
            perf.progress(perf.stage - 1, perf.stages)
    committed = time.perf_counter() - started
    flush = flush_index(ns)
    elapsed = committed + flush
    wal = wal_since(lsn)
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

    ns = new_namespace(perf, "ingest-grouped")
    lsn = wal_lsn()
    started = time.perf_counter()
    for first in range(0, n, 100):
        observations_ingest(namespace=ns, observations=[
            {"facts": fact_batch("fact", i * 30, keys, i)} for i in range(first, min(n, first + 100))])
        perf.progress(perf.stage - 1, perf.stages)
    committed = time.perf_counter() - started
    flush = flush_index(ns)
    grouped = committed + flush
    grouped_rate = facts / grouped
    perf.add("ingest", "services facts/s (group commit, incl. index flush)", grouped_rate,
             "facts/s", goal=GOALS["services_facts_per_s"],
             met=grouped_rate >= GOALS["services_facts_per_s"])
    perf.add("ingest", "services facts/s (group commit, commits only)", facts / committed,
             "facts/s")
    perf.add("ingest", "services WAL bytes per fact (group commit)", wal_since(lsn) / facts, "B")
    return min(elapsed, grouped)


def copy_floor(perf: Perf, services_seconds: float) -> None:
    """The same number of rows as the services wrote, by COPY into a scratch table shaped like
    a version row: once in one COPY, and once as one COPY + COMMIT per observation."""
    scale = SCALES[perf.scale]
    facts = scale.ingest_observations * FACTS_PER_OBSERVATION
    with cursor() as cur:
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

    lsn = wal_lsn()
    started = time.perf_counter()
    with transaction.atomic():
        copy(rows)
    bulk = time.perf_counter() - started
    bulk_wal = wal_since(lsn)
    lsn = wal_lsn()
    started = time.perf_counter()
    for i in range(0, facts, FACTS_PER_OBSERVATION):
        with transaction.atomic():
            copy(rows[i:i + FACTS_PER_OBSERVATION])
    per_obs = time.perf_counter() - started
    per_obs_wal = wal_since(lsn)
    with cursor() as cur:
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
