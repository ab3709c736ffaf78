"""How long deleting a namespace takes (SPEC §13), and that no statement grows with it.

``python -m bench.namespace_delete [--scale small|medium|full] [--out bench/out]`` (with
``PMEM_DATA_DIR`` set as for ``make run``; it migrates first). Two shapes per size, each a
namespace of its own written straight into the tables (``bench.history_seed``: the shape the
commit writes, with an observation per version of a long key):

- **deep**: ten keys of ``N/10`` versions each (a polled status);
- **wide**: ``N/2`` keys of two versions each (a user's many facts).

Each is deleted through :func:`memory.services.namespace_delete` beside a namespace of the same
shape a tenth of its size, in the same run; an execute wrapper times every statement, so the
answer says the total, the statements, and the longest one — the work one statement (and one
transaction) holds locks for, which must stay flat while the namespace grows tenfold. Writes
``namespace_delete.json``, ``.md`` and ``.png`` under ``--out``."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

SCALES = {"small": (2_000, 20_000), "medium": (10_000, 100_000), "full": (100_000, 1_000_000)}


def _setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pmem_site.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def _seed(name: str, shape: str, versions: int) -> Any:
    from bench.history_seed import seed_cells, seed_key
    from memory.services import namespace_create

    ns = namespace_create(name=name)
    if shape == "deep":
        for k in range(10):
            seed_key(ns, f"status_{k}", versions // 10)
    else:
        seed_cells(ns, versions // 2)
    return ns


def _delete(ns: Any) -> dict[str, Any]:
    from django.db import connection

    from memory.services import namespace_delete

    durations: list[float] = []
    slowest: list[tuple[float, str]] = [(0.0, "")]

    def timed(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            took = time.perf_counter() - started
            durations.append(took)
            if took > slowest[0][0]:
                slowest[0] = (took, " ".join(sql.split())[:120])

    with connection.execute_wrapper(timed):
        started = time.perf_counter()
        deleted = namespace_delete(namespace=ns, actor="system:bench")
        seconds = time.perf_counter() - started
    durations.sort()
    return {"seconds": round(seconds, 2), "statements": len(durations),
            "longest_statement_ms": round(durations[-1] * 1000, 1),
            "longest_statement": slowest[0][1],
            "p99_statement_ms": round(durations[int(len(durations) * 0.99)] * 1000, 1),
            "counts": deleted.audit.counts,
            "versions_per_second": round(deleted.audit.counts["versions"] / seconds)}


def run(scale: str, out: Path, shapes: tuple[str, ...] = ("deep", "wide")) -> dict[str, Any]:
    _setup()
    stamp = time.strftime("%Y%m%d%H%M%S")
    rows = []
    for shape in shapes:
        for versions in SCALES[scale]:
            ns = _seed(f"bench-nsdel-{shape}-{versions}-{stamp}", shape, versions)
            result = _delete(ns)
            rows.append({"shape": shape, "versions": versions, **result})
            sys.stderr.write(f"namespace_delete: {shape} {versions}: {result}\n")
    body = {"scale": scale, "rows": rows}
    out.mkdir(parents=True, exist_ok=True)
    (out / "namespace_delete.json").write_text(json.dumps(body, indent=2))
    (out / "namespace_delete.md").write_text(_table(rows))
    _plot(rows, out / "namespace_delete.png")
    return body


def _table(rows: list[dict[str, Any]]) -> str:
    lines = ["| shape | versions | observations | seconds | versions/s | statements |"
             " longest statement | p99 statement |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['shape']} | {r['versions']:,} | {r['counts']['observations']:,} |"
                     f" {r['seconds']} | {r['versions_per_second']:,} | {r['statements']:,} |"
                     f" {r['longest_statement_ms']} ms | {r['p99_statement_ms']} ms |")
    return "\n".join(lines) + "\n"


def _plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for shape in ("deep", "wide"):
        mine = [r for r in rows if r["shape"] == shape]
        xs = [r["versions"] for r in mine]
        left.plot(xs, [r["seconds"] for r in mine], marker="o", label=shape)
        right.plot(xs, [r["longest_statement_ms"] for r in mine], marker="o", label=shape)
    for ax, title in ((left, "delete, seconds"), (right, "longest statement, ms")):
        ax.set_xscale("log")
        ax.set_xlabel("versions in the namespace")
        ax.set_title(title)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", choices=sorted(SCALES), default="medium")
    parser.add_argument("--out", type=Path, default=Path("bench/out"))
    parser.add_argument("--shapes", default="deep,wide", help="deep, wide or both")
    args = parser.parse_args()
    print(_table(run(args.scale, args.out, tuple(args.shapes.split(",")))["rows"]))
