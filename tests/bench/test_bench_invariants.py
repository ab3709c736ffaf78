"""The write-path invariants the paper reports, checked by running the model-free scenarios
through ``pmem_bench`` at small sizes (paper §4.2, Table 6, Table 8, §4.2.3, Appendix F)."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def no_model(settings):
    settings.PMEM_LLM_BASE_URL = ""


def _bench(tmp_path, scenario: str, *args: str) -> list[dict]:
    out = StringIO()
    call_command("pmem_bench", scenario, "--out", str(tmp_path), *args, stdout=out, stderr=StringIO())
    assert f"## {scenario}" in out.getvalue()
    for suffix in ("json", "md", "png"):
        assert (tmp_path / f"{scenario}.{suffix}").stat().st_size > 0
    return json.loads((tmp_path / f"{scenario}.json").read_text())["results"]


def _row(results: list[dict], arm: str, **axis) -> dict:
    return next(r for r in results if r["arm"] == arm and all(r.get(k) == v for k, v in axis.items()))


def test_commit_stays_current_at_every_chain_length(tmp_path):
    results = _bench(tmp_path, "alfworld-revision", "--cases", "4", "--L", "1,2,4,8")
    for length in (1, 2, 4, 8):
        commit = _row(results, "commit", L=length)
        assert commit["accuracy"] == 100.0 and commit["n"] == 4
        assert commit["context_chars"] < 60  # one cell line, not a retrieved listing
        for arm in ("raw_top10", "raw_order_tags", "raw_oracle_order"):
            raw = _row(results, arm, L=length)
            assert raw["status"] == "needs a model" and raw["accuracy"] is None


def test_retention_decides_reversibility(tmp_path):
    results = _bench(tmp_path, "retraction", "--cases", "4", "--d", "0,32")
    for distance in (0, 32):
        kept = _row(results, "commit", d=distance)
        crud = _row(results, "commit_no_retention", d=distance)
        assert kept["committed"] == crud["committed"] == 100.0  # the error is committed first
        assert kept["recovered"] == 100.0 and kept["v1_in_store"] == 100.0
        assert crud["recovered"] == 0.0 and crud["lost"] == 100.0 and crud["v1_in_store"] == 0.0
        assert _row(results, "raw_top10", d=distance)["status"] == "needs a model"


def test_contest_is_recorded_flagged_and_resolved(tmp_path):
    results = _bench(tmp_path, "contest", "--cases", "4")
    commit = _row(results, "commit")
    assert commit["recorded"] == 100.0 and commit["flagged"] == 100.0
    assert commit["accuracy"] == 100.0
    crud = _row(results, "commit_no_retention")
    assert crud["recorded"] == 0.0 and crud["flagged"] == 0.0


def test_factconsolidation_write_path_audit(tmp_path):
    results = _bench(tmp_path, "factconsolidation", "--sizes", "455", "--questions", "5")
    audit = _row(results, "commit", status="audit")
    assert 55.0 <= audit["overwrite_rate"] <= 63.0
    assert audit["gold_in_keyed_head"] == 100.0
    assert audit["stale_heads"] == 0
    assert audit["cells_per_key"] == 1.0
    assert _row(results, "raw_top12", hops="single")["status"] == "needs a model"
