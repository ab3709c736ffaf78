"""Side by side (bench/README.md): wall and CPU time (this process and its PostgreSQL backend)
of pmem_bench perf's ingest workload and of the reads, printed as one JSON line. It uses only
the services and selectors, so the same script runs on the code before and after a change."""
from __future__ import annotations

import json
import os
import statistics
import time
import uuid

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pmem_site.settings")
django.setup()

from django.db import connection  # noqa: E402

import memory  # noqa: E402
from memory.selectors.cells import cell_detail, cell_value  # noqa: E402
from memory.selectors.search import frontier_read  # noqa: E402
from memory.services import namespace_create, observation_ingest, observations_ingest  # noqa: E402
from memory.services.frontier import frontier_flush, frontier_flush_wait  # noqa: E402

N = int(os.environ.get("AB_OBS", "100"))
TICK = os.sysconf("SC_CLK_TCK")
run = uuid.uuid4().hex[:6]


def backend_cpu() -> float:
    with connection.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        pid = cur.fetchone()[0]
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def clocks() -> tuple[float, float, float]:
    return time.perf_counter(), time.process_time(), backend_cpu()


def since(start: tuple[float, float, float], facts: int) -> dict[str, float]:
    end = clocks()
    wall, proc, back = (e - s for e, s in zip(end, start, strict=True))
    return {"facts_per_s": facts / wall, "cpu_ms_per_fact": 1000 * (proc + back) / facts,
            "py_ms_per_fact": 1000 * proc / facts, "pg_ms_per_fact": 1000 * back / facts}


def facts(i: int, keys: int) -> list[dict[str, str]]:
    return [{"key": f"fact_{(i * 30 + j) % keys}_attr", "value": f"value {i} of {j}"}
            for j in range(30)]


res: dict[str, float | str] = {}
keys = N * 15
ns = namespace_create(name=f"ab-{run}-single")
for i in range(3):
    observation_ingest(namespace=ns, facts=[{"key": f"warm_{i}_{j}", "value": "v"} for j in range(30)])
start = clocks()
for i in range(N):
    observation_ingest(namespace=ns, facts=facts(i, keys))
res.update({f"single {k}": v for k, v in since(start, N * 30).items()})
frontier_flush_wait()
frontier_flush(namespace_id=ns.pk)

ns = namespace_create(name=f"ab-{run}-group")
start = clocks()
for first in range(0, N, 100):
    observations_ingest(namespace=ns, observations=[{"facts": facts(i, keys)}
                                                    for i in range(first, min(N, first + 100))])
res.update({f"group {k}": v for k, v in since(start, N * 30).items()})
frontier_flush_wait()
frontier_flush(namespace_id=ns.pk)

cells = 2000
ns = namespace_create(name=f"ab-{run}-reads")
for first in range(0, cells * 2 // 30, 50):
    observations_ingest(namespace=ns, observations=[
        {"facts": [{"key": f"entity_{(i * 30 + j) % cells}_attr", "value": f"value {i} of {j}"}
                   for j in range(30)]} for i in range(first, min(cells * 2 // 30, first + 50))])
frontier_flush_wait()
frontier_flush(namespace_id=ns.pk)
names = [f"entity_{i}_attr" for i in range(cells)]
queries = [f"entity {i} attr" for i in range(0, cells, 37)]
for name, call, n in (
        ("cell_value", lambda i: cell_value(namespace=ns, key=names[i % cells]), 600),
        ("cell_detail", lambda i: cell_detail(namespace=ns, key=names[(7 * i) % cells]), 200),
        ("frontier_read", lambda i: frontier_read(namespace=ns, query=queries[i % len(queries)],
                                                  k=12), 200)):
    times = []
    start = clocks()
    for i in range(n):
        t = time.perf_counter()
        call(i)
        times.append(time.perf_counter() - t)
    total = since(start, n)
    res[f"{name} p50 ms"] = 1000 * statistics.median(times)
    res[f"{name} cpu ms"] = total["cpu_ms_per_fact"]
res["memory_path"] = memory.__file__
print("RESULT " + json.dumps(res))
