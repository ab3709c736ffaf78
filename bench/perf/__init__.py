"""``pmem_bench perf``: the write and read paths measured side by side with the floor.

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
  1, 5, 20 observations of 500 facts x 1.9 KB (``bench/perf/graph.py``; ``--only graph`` runs
  it alone, ``--baseline DIR`` measures older code beside this one).

The scratch tables (``perf_*``) live in the benchmark's database and are dropped at the end.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from django.db import connection

from .common import GOALS, SCALES, Perf, scalar
from .frontier import frontier
from .graph import graph_memory
from .growth import growth, point_read
from .ingest import copy_floor, ingest_services
from .report import NAME, markdown, plot, write
from .rollback import rollback
from .stack import api_and_stream

__all__ = ["NAME", "markdown", "plot", "run", "write"]


def run(config: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    scale = getattr(config, "scale", None) or "medium"
    perf = Perf(scale=scale, run_id=config.run_id[-6:], out=Path(config.out),
                progress=config.progress)
    perf.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    only = getattr(config, "only", None)  # "graph": that section alone
    perf.stages = 1 if only else perf.stages + 1
    if not only:
        _all_but_graph(perf, scale)
    perf.next_stage("graph memory: one cell's graph through gunicorn, peak worker RSS")
    graph_memory(perf, getattr(config, "baseline", None))
    perf.progress(perf.stages, perf.stages)

    config_out = {
        "run_id": config.run_id, "scale": scale, "scale_params": SCALES[scale].__dict__,
        "goals": GOALS, "seconds": round(time.perf_counter() - started, 1),
        "machine": {"cpus": os.cpu_count(), "load_avg": os.getloadavg()},
        "postgres": str(scalar("SHOW server_version")),
        "pgvector": str(scalar("SELECT extversion FROM pg_extension WHERE extname = 'vector'")),
        "database": connection.settings_dict["NAME"], "series": perf.series,
    }
    return config_out, perf.rows


def _all_but_graph(perf: Perf, scale: str) -> None:
    perf.next_stage("ingest through the services (observations of 30 facts)")
    services = ingest_services(perf)
    perf.next_stage("COPY floor")
    copy_floor(perf, services)
    perf.next_stage("ingest through API (gunicorn) + Celery worker")
    api_and_stream(perf, services)
    perf.next_stage(f"growth to {SCALES[scale].growth_versions} versions, reads at 1x/40x")
    growth(perf)
    point_read(perf)
    perf.next_stage("rollback on a long vs a short chain")
    rollback(perf)
    perf.next_stage("frontier top-12: HNSW vs exact scan")
    frontier(perf)
