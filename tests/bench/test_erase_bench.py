"""``pmem_bench erase`` at its smallest scale: it writes its JSON, Markdown and plot, and its
figures say what the erase promises (statements that do not grow with the key, every polled
observation redacted, the mentions found)."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db(transaction=True)


def test_erase_bench_writes_its_report_and_holds_its_invariants(tmp_path):
    out = StringIO()
    call_command("pmem_bench", "erase", "--scale", "small", "--out", str(tmp_path), stdout=out,
                 stderr=StringIO())
    assert "## erase (scale small)" in out.getvalue()
    for suffix in ("json", "md", "png"):
        assert (tmp_path / f"erase.{suffix}").stat().st_size > 0
    report = json.loads((tmp_path / "erase.json").read_text())
    rows = {r["shape"]: r for r in report["results"]}
    for row in rows.values():
        # Constant whatever the key's length, but for the mention search: a statement (in a
        # savepoint: three through the wrapper) per 200 distinct values, every value searched.
        assert row["statements"] - 3 * row["mention_batches"] == \
            row["short_statements"] - 3 * row["short_mention_batches"]
        assert row["mention_batches"] == -(-row["versions"] // 200)  # one value per version
        assert row["values_unsearched"] == 0
        assert row["mentions"] >= 1
    assert rows["polled"]["redacted_evidence"] == rows["polled"]["versions"]
    assert rows["bulk"]["redacted_evidence"] == rows["bulk"]["versions"] // 500
    assert {c["table"] for c in report["config"]["index_cost"]} == {"version value",
                                                                   "evidence text"}
