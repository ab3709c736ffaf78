"""``python -m bench.hostile_import [MiB]``: the peak memory of ``pmem_import`` refusing a
hostile file — a valid header, then ONE line of MiB mebibytes (default 600) in a gzip file of
a few MB — beside a bare Django process (``manage.py check``) and the line limit. Prints a
markdown table for bench/README.md, "Export and import of a namespace"."""

from __future__ import annotations

import gzip
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECORDS = ("namespace", "trust", "observation", "cell", "alias", "version", "operation",
           "span", "support", "tombstone", "erasure")


def hostile_file(path: Path, mib: int) -> None:
    counts = dict.fromkeys(RECORDS, 0) | {"namespace": 1}
    header = {"format": "pmem-export", "version": 2, "namespace": "h", "counts": counts}
    with gzip.open(path, "wb", compresslevel=1) as out:
        out.write(json.dumps(header).encode() + b'\n{"type":"namespace","name":"')
        block = b"a" * (1 << 20)
        for _ in range(mib):
            out.write(block)
        out.write(b'"}\n')


def main(mib: int) -> str:
    import os

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pmem_site.settings")
    import django

    django.setup()
    from memory.services.admission import limits

    from .transfer import _measured

    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "hostile.ndjson.gz"
        hostile_file(path, mib)
        size = path.stat().st_size
        bare = _measured([sys.executable, "manage.py", "check"])
        peak = _peak_of([sys.executable, "manage.py", "pmem_import", str(path), "--as",
                         "hostile-line"])
    lines = ["| file | line | line limit | seconds | peak RSS | bare Django |", "|---|---|---|---|---|---|",
             f"| {size / 2**20:.1f} MiB .gz | {mib} MiB | {limits().line_bytes() / 2**20:.0f} MiB"
             f" | {peak['seconds']} | {peak['rss_mib']} MiB | {bare['rss_mib']} MiB |",
             "", f"refusal: {peak['stderr'].strip().splitlines()[-1] if peak['stderr'] else ''}"]
    return "\n".join(lines)


def _peak_of(args: list[str]) -> dict[str, object]:
    import subprocess
    import time

    from .transfer import _peak_kib

    started, peak = time.perf_counter(), 0
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)
        while proc.poll() is None:
            peak = max(peak, _peak_kib(proc.pid))
            time.sleep(0.02)
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    return {"seconds": round(time.perf_counter() - started, 2), "rss_mib": round(peak / 1024, 1),
            "stderr": stderr, "returncode": proc.returncode}


if __name__ == "__main__":
    print(main(int(sys.argv[1]) if len(sys.argv) > 1 else 600))
