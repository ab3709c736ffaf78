"""The frontier index kept off the commit path (issue 7): commits mark moved cells stale and
drop their indexed copies, reads merge the HNSW search with an exact scan of the stale cells,
and a flush re-indexes them. Reads must be exact at every moment in between."""

from __future__ import annotations

import pytest
from django.test import override_settings

from memory.domain import OpType
from memory.models import Cell, FrontierVector
from memory.selectors import frontier_read
from memory.services import observation_ingest, observations_ingest, operation_apply
from memory.services.frontier import frontier_flush, frontier_flush_all, stale_count

pytestmark = pytest.mark.django_db


def _top(ns, query, k=3):
    return [(i["key"], i["value"]) for i in frontier_read(namespace=ns, query=query, k=k).items]


def test_a_moved_head_is_read_at_once_then_indexed_by_the_flush(ns):
    observation_ingest(namespace=ns, facts=[{"key": "mug_location", "value": "table"},
                                            {"key": "lamp_color", "value": "red"}])
    assert stale_count(namespace_id=ns.pk) == 2
    assert not FrontierVector.objects.filter(namespace=ns).exists()
    assert _top(ns, "mug location table", k=1) == [("mug_location", "table")]

    assert frontier_flush(namespace_id=ns.pk) == 2
    assert stale_count(namespace_id=ns.pk) == 0
    assert FrontierVector.objects.filter(namespace=ns).count() == 2
    assert _top(ns, "mug location table", k=1) == [("mug_location", "table")]

    observation_ingest(namespace=ns, facts=[{"key": "mug_location", "value": "shelf"}])
    # The moved cell left the index and is scanned exactly: the new value, never the old.
    assert set(FrontierVector.objects.filter(namespace=ns).values_list("cell__key", flat=True)
               ) == {"lamp_color"}
    assert _top(ns, "mug location", k=1) == [("mug_location", "shelf")]
    frontier_flush(namespace_id=ns.pk)
    assert _top(ns, "mug location", k=1) == [("mug_location", "shelf")]


def test_each_cell_is_read_once_whether_indexed_or_stale(ns):
    observation_ingest(namespace=ns, facts=[{"key": f"item_{i}_place", "value": f"box {i}"}
                                            for i in range(6)])
    frontier_flush(namespace_id=ns.pk)
    observation_ingest(namespace=ns, facts=[{"key": f"item_{i}_place", "value": f"bag {i}"}
                                            for i in range(3)])
    top = _top(ns, "item place", k=12)
    assert sorted(top) == sorted([(f"item_{i}_place", f"bag {i}") for i in range(3)]
                                 + [(f"item_{i}_place", f"box {i}") for i in range(3, 6)])


def test_a_cell_emptied_by_rollback_leaves_the_frontier(ns):
    observation_ingest(namespace=ns, facts=[{"key": "door_state", "value": "open"}])
    frontier_flush(namespace_id=ns.pk)
    operation_apply(namespace=ns, key="door_state", op=OpType.REVOKE, actor="user:t")
    assert _top(ns, "door state open") == []
    frontier_flush(namespace_id=ns.pk)
    assert not FrontierVector.objects.filter(namespace=ns).exists()
    assert _top(ns, "door state open") == []


def test_the_drain_flushes_once_a_namespace_holds_enough_stale_cells(ns):
    with override_settings(PMEM_FRONTIER_FLUSH_AT=50):
        observations_ingest(namespace=ns, observations=[
            {"facts": [{"key": f"k{o}_{j}", "value": "v"} for j in range(20)]} for o in range(2)])
        assert stale_count(namespace_id=ns.pk) == 40  # below the threshold: left stale
        observation_ingest(namespace=ns, facts=[{"key": f"k9_{j}", "value": "v"}
                                                for j in range(20)])
    assert stale_count(namespace_id=ns.pk) == 0
    assert FrontierVector.objects.filter(namespace=ns).count() == 60


def test_flush_all_covers_every_namespace_and_is_idempotent(make_namespace):
    a, b = make_namespace("fa"), make_namespace("fb")
    observation_ingest(namespace=a, facts=[{"key": "x", "value": "1"}])
    observation_ingest(namespace=b, facts=[{"key": "y", "value": "2"}])
    assert frontier_flush_all() >= 2
    assert frontier_flush_all() == 0
    assert not Cell.objects.filter(namespace__in=[a, b], vector_stale=True).exists()
    assert FrontierVector.objects.filter(namespace__in=[a, b]).count() == 2


@pytest.mark.django_db(transaction=True)
def test_one_bad_observation_in_a_group_fails_alone(ns):
    # The middle observation cannot be committed (its key overflows the key column, which the
    # API would have refused): the group is rolled back and re-committed one by one, so the
    # others commit, in seq order, and the bad one is failed with its error, nothing of it kept.
    from memory.models import Evidence, Operation

    evidence = observations_ingest(namespace=ns, observations=[
        {"facts": [{"key": "a", "value": "1"}]},
        {"facts": [{"key": "b", "value": "2"}, {"key": "x" * 300, "value": "too long"}]},
        {"facts": [{"key": "a", "value": "3"}]},
    ])
    assert [e.state for e in evidence] == ["committed", "failed", "committed"]
    assert "commit failed" in evidence[1].error
    assert not Operation.objects.filter(evidence=evidence[1]).exists()
    assert not Cell.objects.filter(namespace=ns, key="b").exists()
    assert _top(ns, "a", k=5) == [("a", "3")]
    assert Evidence.objects.filter(namespace=ns, state="committed").count() == 2
