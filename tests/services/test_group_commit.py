"""Group commit without a model (docs/decisions.md 14): consecutive observations committed in
one transaction, each planned against what the previous one wrote, and nothing computed
inside that transaction but the graph itself."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory.llm.embedding import HashingEmbedder
from memory.models import Evidence
from memory.selectors import cell_value
from memory.services import observations_ingest

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_group_plans_each_observation_against_the_previous_ones(ns):
    # The third observation withdraws a value only the second one installed, in the same
    # transaction: annotation must see it as the head to revoke it (and roll back to shelf 2).
    with CaptureQueriesContext(connection) as captured:
        evidence = observations_ingest(namespace=ns, observations=[
            {"text": "Update: mug 1 has been moved from table 1 to shelf 2."},
            {"text": "Update: mug 1 has been moved from shelf 2 to cabinet 3."},
            {"text": "The move of mug 1 to cabinet 3 was reported in error."},
        ])
    assert sum(1 for q in captured.captured_queries if q["sql"] == "COMMIT") == 2
    assert [e.state for e in evidence] == ["committed"] * 3
    assert [o.type for o in evidence[2].operations.exclude(type="reinstate")] == ["revoke"]
    assert cell_value(namespace=ns, key="mug_1_location").value == "shelf 2"
    # the commit stored each extraction and evidence vector it computed
    assert all(e.extracted["facts"] and e.embedding is not None
               for e in Evidence.objects.filter(pk__in=[e.pk for e in evidence]))


def test_no_vector_is_computed_inside_the_commit_transaction(ns, monkeypatch):
    seen: list[bool] = []
    original = HashingEmbedder.embed

    def spy(self, texts):
        seen.append(connection.in_atomic_block)
        return original(self, texts)

    monkeypatch.setattr(HashingEmbedder, "embed", spy)
    observations_ingest(namespace=ns, observations=[
        {"facts": [{"key": f"k{i}", "value": f"v{i}"}, {"key": "shared", "value": f"s{i}"}]}
        for i in range(5)])
    assert seen and not any(seen)
