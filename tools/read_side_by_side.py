"""The read side, before and after, in one run (bench/README.md "The read side, side by side"):
the latency and the statement count of the same reads on two checkouts of P-Mem, over one
database, interleaved.

    .venv/bin/python tools/read_side_by_side.py --before /tmp/pmem-main --after . \\
        [--rounds 12] [--calls 20] [--only TEXT] [--out bench/out/read-side-by-side.json]

The driver starts (or joins) the embedded PostgreSQL of ``PMEM_DATA_DIR`` (default
``var/side-by-side``) and seeds one namespace through the ``--after`` checkout's services
(cells with embeddings and a flushed frontier index, a contest, a retraction, one key of
``--versions`` versions). Then it starts one worker process per checkout, each with its
checkout first on ``sys.path``, so each serves the reads with its own code from the same rows
(both checkouts must share the schema: no migration between them). Each round asks both
workers for every read, in ABBA order so that neither always goes first; a worker answers with
the wall time of each call (Django's test client: routing, middleware, authentication, the
view, rendering; no network) and the statements one call issued. The report is the median
per read and side, and the 95th percentile, their after/before ratios, and a plot.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
NAMESPACE = "side-by-side"  # and a suffix per run: a namespace's rows are never deleted
USER, PASSWORD = "side-by-side", "side-by-side"
LONG_KEY = "long_key"


def reads(ns: str) -> dict[str, tuple[str, str, dict[str, Any] | None]]:
    """name -> (method, path, JSON body): the representative reads."""
    api = f"/api/v1/namespaces/{ns}"
    return {
        "cell (API)": ("get", f"{api}/cells/entity_7_attr/", None),
        "history page (API)": ("get", f"{api}/cells/{LONG_KEY}/history/", None),
        "graph window (API)": ("get", f"{api}/cells/{LONG_KEY}/graph/", None),
        "frontier page (API)": ("get", f"{api}/cells/?limit=50", None),
        "read/ frontier (API)": ("post", f"{api}/read/", {"query": "entity 7 attr", "k": 12}),
        "operations log (API)": ("get", f"{api}/operations/?limit=50", None),
        "explorer cell page": ("get", f"/ns/{ns}/cells/{LONG_KEY}/", None),
        "explorer graph window": ("get", f"/ns/{ns}/cells/{LONG_KEY}/graph/", None),
    }


# --- the worker: one checkout's code serving the reads ------------------------------------------


def _call(client: Any, method: str, path: str, body: dict[str, Any] | None) -> Any:
    if method == "post":
        return client.post(path, body, content_type="application/json")
    return client.get(path)


def worker(token: str, namespace: str) -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pmem_site.settings")
    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    import memory

    api = Client(HTTP_AUTHORIZATION=f"Token {token}")
    browser = Client()
    browser.force_login(get_user_model().objects.get(username=USER))
    table = reads(namespace)
    print(json.dumps({"ready": memory.__file__}), flush=True)
    for line in sys.stdin:
        ask = json.loads(line)
        method, path, body = table[ask["read"]]
        client = browser if path.startswith("/ns/") else api
        times = []
        for _ in range(ask["calls"]):
            start = time.perf_counter()
            response = _call(client, method, path, body)
            times.append(time.perf_counter() - start)
            assert response.status_code == 200, (path, response.status_code)
        with CaptureQueriesContext(connection) as captured:
            _call(client, method, path, body)
        print(json.dumps({"times": times, "statements": len(captured.captured_queries),
                          "bytes": len(response.content)}), flush=True)


# --- the driver -----------------------------------------------------------------------------------


def seed(versions: int, cells: int) -> tuple[str, str]:
    """The namespace both sides read, made by this (--after) checkout: its name, an API
    token."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pmem_site.settings")
    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from bench.history_seed import seed_key
    from memory.services import namespace_create, observations_ingest, operation_apply, token_create
    from memory.services.embeddings import cells_refresh_embeddings
    from memory.services.frontier import frontier_flush, frontier_flush_wait

    call_command("migrate", verbosity=0)
    ns = namespace_create(name=f"{NAMESPACE}-{uuid.uuid4().hex[:6]}")
    for first in range(0, cells * 2 // 30, 50):
        observations_ingest(namespace=ns, observations=[
            {"facts": [{"key": f"entity_{(i * 30 + j) % cells}_attr", "value": f"value {i} of {j}"}
                       for j in range(30)]} for i in range(first, min(cells * 2 // 30, first + 50))])
    operation_apply(namespace=ns, key="entity_7_attr", op="contest", value="elsewhere",
                    actor="user:sbs", explicit=True)
    operation_apply(namespace=ns, key="entity_8_attr", op="revoke", actor="user:sbs",
                    explicit=True)
    # A long key, embedded as every committed cell is (the bulk seed writes no vectors).
    cells_refresh_embeddings(cell_ids=[seed_key(ns, LONG_KEY, versions).pk])
    frontier_flush_wait()
    frontier_flush(namespace_id=ns.pk)
    users = get_user_model().objects
    if not users.filter(username=USER).exists():
        users.create_superuser(USER, "sbs@example.org", PASSWORD)
    return ns.name, token_create(namespace=ns, client="side-by-side", scope="read").key


def start(checkout: Path, token: str, namespace: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker", token,
                             "--namespace", namespace],
                            cwd=checkout, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    ready = json.loads(proc.stdout.readline())  # type: ignore[union-attr]
    assert Path(ready["ready"]).is_relative_to(checkout), (checkout, ready)
    return proc


def ask(proc: subprocess.Popen[str], read: str, calls: int) -> dict[str, Any]:
    proc.stdin.write(json.dumps({"read": read, "calls": calls}) + "\n")  # type: ignore[union-attr]
    proc.stdin.flush()  # type: ignore[union-attr]
    return json.loads(proc.stdout.readline())  # type: ignore[union-attr]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path)
    parser.add_argument("--after", type=Path, default=HERE)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--versions", type=int, default=2000)
    parser.add_argument("--cells", type=int, default=1500)
    parser.add_argument("--out", type=Path, default=HERE / "bench/out/read-side-by-side.json")
    parser.add_argument("--plot", type=Path, default=HERE / "bench/figures/read-side-by-side.png")
    parser.add_argument("--only", default="", help="the reads whose name holds this text")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--namespace", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.namespace)
        return
    os.environ.setdefault("PMEM_DATA_DIR", str(HERE / "var/side-by-side"))
    from pmem_site import embedded

    embedded.start()
    os.environ.setdefault("DATABASE_URL", embedded.database_url())
    os.environ.setdefault("REDIS_URL", embedded.broker_url())
    namespace, token = seed(args.versions, args.cells)
    sides = {"before": start(args.before.resolve(), token, namespace),
             "after": start(args.after.resolve(), token, namespace)}
    table = [r for r in reads(namespace) if args.only in r]
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {r: {"before": [], "after": []}
                                                         for r in table}
    for read in table:  # warm both: caches, prepared statements, the token's last use
        for proc in sides.values():
            ask(proc, read, 3)
    for round_ in range(args.rounds):
        order = ("before", "after", "after", "before") if round_ % 2 else \
            ("after", "before", "before", "after")
        for read in table:
            for side in order:
                runs[read][side].append(ask(sides[side], read, max(1, args.calls // 2)))
    for proc in sides.values():
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait()
    report(runs, args)


def report(runs: dict[str, dict[str, list[dict[str, Any]]]], args: argparse.Namespace) -> None:
    rows = []
    for read, sides in runs.items():
        row: dict[str, Any] = {"read": read}
        for side, answers in sides.items():
            times = [t for a in answers for t in a["times"]]
            row[f"{side} p50 ms"] = round(1000 * statistics.median(times), 3)
            row[f"{side} p95 ms"] = round(1000 * statistics.quantiles(times, n=20)[-1], 3)
            row[f"{side} statements"] = sorted({a["statements"] for a in answers})
            row[f"{side} bytes"] = answers[-1]["bytes"]
        row["ratio"] = round(row["after p50 ms"] / row["before p50 ms"], 3)
        row["p95 ratio"] = round(row["after p95 ms"] / row["before p95 ms"], 3)
        rows.append(row)
        print(f"{read:26} p50 {row['before p50 ms']:7.2f} → {row['after p50 ms']:7.2f} ms"
              f" ({row['ratio']:.3f})  p95 {row['before p95 ms']:7.2f} → "
              f"{row['after p95 ms']:7.2f} ms ({row['p95 ratio']:.3f})  statements "
              f"{row['before statements']} → {row['after statements']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rounds": args.rounds, "calls": args.calls,
                                    "versions": args.versions, "cells": args.cells,
                                    "rows": rows}, indent=1) + "\n")
    plot(rows, args.plot)


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.6))
    names = [r["read"] for r in rows]
    at = range(len(rows))
    ax.barh([i - 0.2 for i in at], [r["ratio"] for r in rows], height=0.4, color="#5b6472",
            label="median")
    ax.barh([i + 0.2 for i in at], [r["p95 ratio"] for r in rows], height=0.4,
            color="#a9b0bc", label="p95")
    ax.set_yticks(list(at), names)
    ax.legend(loc="lower right")
    ax.axvline(1.0, color="#1d2330", linewidth=1)
    for bound in (0.95, 1.05):
        ax.axvline(bound, color="#b35900", linewidth=1, linestyle="--")
    ax.set_xlabel("after / before, latency (dashed: ±5 %)")
    ax.invert_yaxis()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
