"""The erase report's mention search covers every erased value, a batch at a time, and says
exactly how many it could not look up and why (the probe: a 3,000-version key reported
``values_unsearched: 2800``)."""

from __future__ import annotations

import pytest

from bench.history_seed import seed_key
from memory.models import Cell, Evidence
from memory.services import cell_erase, erase, observation_ingest, operation_apply

pytestmark = pytest.mark.django_db

VERSIONS = 3000


@pytest.fixture
def long_key(ns):
    """``position`` with 3,000 distinct values, the last ``: `` (which no index holds); an
    observation elsewhere quotes the oldest, another cell holds a middle one."""
    seed_key(ns, "position", VERSIONS - 1)  # "position 1" … "position 2999"
    operation_apply(namespace=ns, key="position", op="accept", value=": ", actor="user:t")
    observation_ingest(namespace=ns, text="the first fix was position 1, long ago")
    observation_ingest(namespace=ns, facts=[{"key": "home", "value": "position 1500"}])
    return ns


def test_every_value_of_a_3000_version_key_is_searched(long_key, monkeypatch):
    # What is under test is coverage, not speed (about a second here): a loaded machine must
    # not turn it into a count of values out of time.
    monkeypatch.setattr(erase, "MENTIONS_BUDGET_MS", 120_000)
    erased = cell_erase(namespace=long_key, key="position", actor="user:t", report=True)
    assert erased.audit.versions_erased == VERSIONS
    report = erased.report()
    note = Evidence.objects.get(namespace=long_key, text__startswith="the first fix")
    home = Cell.objects.get(namespace=long_key, key="home")
    assert {(m["kind"], m["id"]) for m in report["mentions"]} >= {
        ("evidence", note.pk), ("cell", home.pk)}
    assert report["values_unsearched"] == 1
    assert report["values_unsearched_by_reason"] == {"no_letter_or_digit": 1}
    assert report["mentions_truncated"] is False


def test_values_past_the_time_budget_are_counted_as_such(long_key, monkeypatch):
    monkeypatch.setattr(erase, "MENTIONS_BUDGET_MS", 0)
    report = cell_erase(namespace=long_key, key="position", actor="user:t",
                        report=True).report()
    assert report["values_unsearched"] == VERSIONS
    assert report["values_unsearched_by_reason"] == {"out_of_time": VERSIONS}
    assert report["mentions_truncated"] is True and report["mentions"] == []
