"""``pmem_bench transfer`` at a tiny scale: it writes its JSON, Markdown and plot; every step
ran on the same records, and the import really made a copy (then removed it)."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from bench import transfer
from memory.models import Namespace

pytestmark = pytest.mark.django_db(transaction=True)


def test_transfer_bench_writes_its_report(tmp_path, monkeypatch):
    monkeypatch.setitem(transfer.SCALES, "small", (300, 1_000))
    out = StringIO()
    call_command("pmem_bench", "transfer", "--scale", "small", "--out", str(tmp_path),
                 stdout=out, stderr=StringIO())
    assert "## transfer (scale small)" in out.getvalue()
    for suffix in ("json", "md", "png"):
        assert (tmp_path / f"transfer.{suffix}").stat().st_size > 0
    report = json.loads((tmp_path / "transfer.json").read_text())
    rows = report["results"]
    assert {r["step"] for r in rows} == {
        "pmem_export (.ndjson)", "pmem_export (.ndjson.gz)", "pmem_import",
        "pg_dump -Fc (whole database)", "pg_restore (whole database)"}
    by_data = {r["dataset"]: r["records"] for r in rows}
    # 300 versions: each with an observation, an operation, a support edge and two spans (the
    # head one), plus the cell and the namespace row.
    assert by_data["one key, 300 versions"] == 300 * 6 - 1 + 2
    assert all(r["seconds"] > 0 and r["rss_mib"] > 0 and r["per_second"] > 0 for r in rows)
    assert not Namespace.objects.filter(name__startswith="bench-transfer-").exists()
