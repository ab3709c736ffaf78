"""Bounded reads of a key's history (SPEC §10): pages, search, windows, timeline, frontier as of T."""

from __future__ import annotations

from datetime import timedelta

import pytest

from memory.domain import BadParameter
from memory.models import Cell, Operation, Version
from memory.selectors.frontier import frontier_as_of
from memory.selectors.graph import graph_window
from memory.selectors.history import cursor_for, history_page
from memory.selectors.timeline import status_timeline, version_at
from memory.services import operation_apply

pytestmark = pytest.mark.django_db


def op(ns, key, kind, value=None, version=None):
    return operation_apply(namespace=ns, key=key, op=kind, value=value, version_id=version,
                           actor="user:test", explicit=True)


def cell(ns, key="k"):
    return Cell.objects.select_related("head").get(namespace=ns, key=key)


def test_ordinals_and_counter_follow_commit_order(ns):
    for i in range(5):
        op(ns, "k", "accept", f"v{i}")
    op(ns, "k", "contest", "x")
    c = cell(ns)
    assert c.version_count == 6
    assert list(Version.objects.filter(cell=c).order_by("id").values_list("ordinal", flat=True)) \
        == [1, 2, 3, 4, 5, 6]


def test_history_pages_walk_the_whole_history_newest_first_with_the_head(ns):
    for i in range(12):
        op(ns, "k", "accept", f"v{i}")
    c = cell(ns)
    seen, cursor = [], None
    while True:
        page = history_page(c, before=cursor, limit=5)
        entries, cursor, total = page.entries, page.next, page.total
        assert total == 12
        seen += [e.value for e in entries]
        if cursor is None:
            break
    assert seen == [f"v{i}" for i in reversed(range(12))]
    assert history_page(c, limit=5).entries[0].status == "active"  # the head is listed


def test_a_cursor_of_another_key_is_refused_naming_before(ns):
    op(ns, "k", "accept", "a")
    op(ns, "other", "accept", "b")
    with pytest.raises(BadParameter) as refused:
        history_page(cell(ns), before=cursor_for(cell(ns, "other"), 1))
    assert refused.value.field == "before"
    for junk in ("x", "1-", "-1", "1-2-3", "١-٢"):
        with pytest.raises(BadParameter):
            history_page(cell(ns), before=junk)


def test_value_search_finds_words_by_their_start_and_counts_matches(ns):
    for value in ("Lisbon harbour", "Berlin", "lisbon airport", "Porto", "LISBON"):
        op(ns, "k", "accept", value)
    page = history_page(cell(ns), search="lisb")
    entries, cursor, total = page.entries, page.next, page.total
    assert [e.value for e in entries] == ["LISBON", "lisbon airport", "Lisbon harbour"]
    assert total == 3 and cursor is None
    assert [e.value for e in history_page(cell(ns), search="lisbon air").entries] == [
        "lisbon airport"]
    with pytest.raises(BadParameter) as refused:
        history_page(cell(ns), search="!!!")
    assert refused.value.field == "search"


def test_graph_window_counts_what_lies_outside_and_keeps_open_alternatives(ns):
    op(ns, "k", "accept", "first")
    for i in range(30):
        op(ns, "k", "accept", f"v{i}")
        op(ns, "k", "noop")
    rival = op(ns, "k", "contest", "rival").operation.version_id
    c = cell(ns)
    total = c.version_count
    graph = graph_window(c, limit=10)
    w = graph["window"]
    assert w["versions"] == 10 and w["newer"] == 0 and w["older"] == total - 10
    versions = [n for n in graph["nodes"] if n["kind"] == "version"]
    assert {c.head_id, rival} <= {n["version"] for n in versions}
    oldest = Version.objects.filter(cell=c).order_by("ordinal").first()
    around = graph_window(c, around=oldest.id, limit=10)
    assert around["window"]["older"] == 0 and around["window"]["newer"] == total - 10
    shown = {n["version"] for n in around["nodes"] if n["kind"] == "version"}
    assert {c.head_id, rival, oldest.id} <= shown  # the open contest, outside the window too


def test_around_a_version_of_another_key_is_refused_naming_around(ns):
    op(ns, "k", "accept", "a")
    other = op(ns, "other", "accept", "b").operation.version_id
    with pytest.raises(BadParameter) as refused:
        graph_window(cell(ns), around=other)
    assert refused.value.field == "around"


def test_timeline_aggregates_by_status_into_few_buckets(ns):
    for i in range(20):
        op(ns, "k", "accept", f"v{i}")
    op(ns, "k", "revoke")
    line = status_timeline(cell(ns), buckets=4)
    assert line["total"] == 20
    counts: dict[str, int] = {}
    for b in line["bins"]:
        for status, n in b["counts"].items():
            counts[status] = counts.get(status, 0) + n
    assert counts == {"superseded": 18, "active": 1, "revoked": 1}
    assert len(line["bins"]) <= 4


def test_frontier_as_of_lists_keys_that_existed_with_their_values_then(ns):
    op(ns, "a", "accept", "a1")
    t1 = Operation.objects.filter(namespace=ns).latest("id").created_at
    op(ns, "a", "accept", "a2")
    op(ns, "b", "accept", "b1")
    rows, nxt = frontier_as_of(ns, t1)
    assert [(r.key, r.value, r.status) for r in rows] == [("a", "a1", "active")] and nxt is None
    rows, _ = frontier_as_of(ns, t1 - timedelta(days=1))
    assert rows == []
    now_rows, _ = frontier_as_of(ns, t1 + timedelta(days=1))
    assert [(r.key, r.value) for r in now_rows] == [("a", "a2"), ("b", "b1")]
    page, nxt = frontier_as_of(ns, t1 + timedelta(days=1), limit=1)
    assert [r.key for r in page] == ["a"] and nxt == "a"


def test_a_jump_to_a_date_lands_on_the_version_the_history_held_then(ns):
    op(ns, "k", "accept", "a")
    t1 = Operation.objects.filter(namespace=ns).latest("id").created_at
    op(ns, "k", "accept", "b")
    t2 = Operation.objects.filter(namespace=ns).latest("id").created_at
    op(ns, "k", "revoke")
    c = cell(ns)
    a = Version.objects.get(cell=c, value="a").id
    b = Version.objects.get(cell=c, value="b").id
    assert version_at(c, t2) == b and version_at(c, t1) == a
    assert version_at(c, t1 - timedelta(days=1)) == a


def test_counts_and_ordinals_hold_when_one_commit_gives_keys_several_versions(ns):
    # The writer numbers a commit's new versions from the counts it read with the cells'
    # locks, and raises each count in the statement that moves the head: a group of
    # observations naming one key again and again, a late report and a contest among them.
    from datetime import timedelta

    from django.utils import timezone

    from memory.services import observations_ingest

    op(ns, "k", "accept", "v0")
    now = timezone.now()
    observations_ingest(namespace=ns, observations=[
        {"facts": [{"key": "k", "value": "v1"}, {"key": "j", "value": "w1"}]},
        {"facts": [{"key": "k", "value": "v2"}, {"key": "k", "value": "v3"}]},
        {"facts": [{"key": "k", "value": "early"}], "observed_at": now - timedelta(days=9)},
        {"facts": [{"key": "j", "value": "w2", "op": "contest"}]},
    ])
    for key in ("k", "j"):
        c = cell(ns, key)
        ordinals = list(Version.objects.filter(cell=c).order_by("id")
                        .values_list("ordinal", flat=True))
        assert c.version_count == len(ordinals)
        assert ordinals == list(range(1, len(ordinals) + 1))
    assert cell(ns, "k").version_count == 5
