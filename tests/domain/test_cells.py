"""One test per cell of the SPEC §3 table and per rollback rule (SPEC §4), on the pure core."""

from __future__ import annotations

import pytest

from memory.domain import InvalidOperation, OpRequest, OpType
from memory.domain.memgraph import MemGraph

K = "mug_location"


def graph(*ops: tuple[str, str | None]) -> MemGraph:
    g = MemGraph()
    for op, value in ops:
        g.apply(K, OpRequest(OpType(op), value))
    return g


def statuses(g: MemGraph) -> dict[str, str]:
    return {v.value: str(v.status) for v in g.versions.values()}


def contested(*alternatives: str) -> MemGraph:
    """A cell whose head 'h' (over predecessor 'p') is contested by ``alternatives``."""
    return graph(("accept", "p"), ("accept", "h"), *(("contest", a) for a in alternatives))


def apply(g: MemGraph, op: str, value: str | None = None, version: int | None = None):
    return g.apply(K, OpRequest(OpType(op), value, version))


def vid(g: MemGraph, value: str) -> int:
    return next(v.id for v in g.versions.values() if v.value == value)


# --- accept ---------------------------------------------------------------------------------


def test_accept_on_empty_cell_creates_active_head():
    g = graph(("accept", "table"))
    assert g.head_value(K) == "table" and statuses(g) == {"table": "active"}


def test_accept_of_head_value_acts_as_noop_and_supports():
    g = graph(("accept", "table"))
    d = apply(g, "accept", "  TABLE ")
    assert not d.applied and len(g.versions) == 1 and g.versions[1].support == 2


def test_accept_new_value_supersedes_active_head():
    g = graph(("accept", "table"), ("accept", "shelf"))
    assert statuses(g) == {"table": "superseded", "shelf": "active"}
    assert g.versions[vid(g, "shelf")].supersedes_id == vid(g, "table")
    assert g.versions[vid(g, "table")].valid_to is not None


def test_accept_of_head_value_in_contested_cell_is_noop():
    g = contested("a")
    d = apply(g, "accept", "h")
    assert not d.applied and statuses(g)["h"] == "contested"


def test_accept_of_alternative_promotes_it_over_contested_head():
    g = contested("a", "b")
    apply(g, "accept", "a")
    assert statuses(g) == {"p": "superseded", "h": "superseded", "a": "active", "b": "superseded"}
    assert g.versions[vid(g, "a")].supersedes_id == vid(g, "h")


def test_accept_new_value_in_contested_cell_supersedes_head_and_alternatives():
    g = contested("a")
    apply(g, "accept", "n")
    assert statuses(g) == {"p": "superseded", "h": "superseded", "a": "superseded", "n": "active"}
    assert g.versions[vid(g, "n")].supersedes_id == vid(g, "h")


# --- reject with a value ----------------------------------------------------------------------


def test_reject_with_value_on_empty_cell_creates_like_accept():
    g = graph(("reject", "table"))
    assert statuses(g) == {"table": "active"}


def test_reject_with_head_value_is_invalid():
    g = graph(("accept", "table"))
    with pytest.raises(InvalidOperation, match="equals the head"):
        apply(g, "reject", "table")


def test_reject_with_new_value_contradicts_active_head():
    g = graph(("accept", "table"), ("reject", "shelf"))
    assert statuses(g) == {"table": "contradicted", "shelf": "active"}
    assert g.versions[vid(g, "shelf")].supersedes_id == vid(g, "table")


def test_reject_with_head_value_in_contested_cell_is_invalid():
    g = contested("a")
    with pytest.raises(InvalidOperation):
        apply(g, "reject", "h")


def test_reject_with_alternative_value_promotes_it_and_contradicts_head():
    g = contested("a", "b")
    apply(g, "reject", "a")
    assert statuses(g) == {"p": "superseded", "h": "contradicted", "a": "active", "b": "superseded"}
    assert g.versions[vid(g, "a")].supersedes_id == vid(g, "h")


def test_reject_with_new_value_in_contested_cell_contradicts_head_supersedes_alternatives():
    g = contested("a")
    apply(g, "reject", "n")
    assert statuses(g) == {"p": "superseded", "h": "contradicted", "a": "superseded", "n": "active"}


# --- reject without a value -------------------------------------------------------------------


def test_reject_without_value_on_empty_cell_is_invalid():
    with pytest.raises(InvalidOperation, match="needs a head"):
        apply(MemGraph(), "reject")


def test_reject_without_value_contradicts_head_and_reinstates_predecessor():
    g = graph(("accept", "table"), ("accept", "shelf"))
    apply(g, "reject")
    assert statuses(g) == {"table": "active", "shelf": "contradicted"}
    assert g.versions[vid(g, "table")].valid_to is None  # the interval reopened


def test_reject_without_value_in_contested_cell_keeps_contest_open_against_predecessor():
    g = contested("a")
    apply(g, "reject")
    assert statuses(g) == {"p": "contested", "h": "contradicted", "a": "alternative"}
    assert g.head_value(K) == "p"


def test_reject_without_value_in_contested_cell_without_predecessor_promotes_oldest_alternative():
    g = graph(("accept", "h"), ("contest", "a"), ("contest", "b"))
    apply(g, "reject")
    assert statuses(g) == {"h": "contradicted", "a": "contested", "b": "alternative"}


# --- contest ---------------------------------------------------------------------------------


def test_contest_on_empty_cell_is_invalid():
    with pytest.raises(InvalidOperation, match="contest needs a head"):
        apply(MemGraph(), "contest", "x")


def test_contest_with_head_value_is_noop_support():
    g = graph(("accept", "table"))
    d = apply(g, "contest", "table")
    assert not d.applied and statuses(g) == {"table": "active"} and g.versions[1].support == 2


def test_contest_with_new_value_adds_alternative_and_flags_head():
    g = graph(("accept", "table"), ("contest", "shelf"))
    assert statuses(g) == {"table": "contested", "shelf": "alternative"}
    assert g.versions[vid(g, "shelf")].alternative_of_id == vid(g, "table")
    assert g.head_value(K) == "table"


def test_contest_with_head_or_alternative_value_in_contested_cell_supports_it():
    g = contested("a")
    apply(g, "contest", "a")
    apply(g, "contest", "h")
    assert g.versions[vid(g, "a")].support == 2 and g.versions[vid(g, "h")].support == 2
    assert len(g.versions) == 3


def test_contest_with_new_value_in_contested_cell_adds_one_more_alternative():
    g = contested("a", "b")
    assert statuses(g) == {"p": "superseded", "h": "contested", "a": "alternative",
                           "b": "alternative"}


# --- revoke ----------------------------------------------------------------------------------


def test_revoke_on_empty_cell_is_invalid():
    with pytest.raises(InvalidOperation, match="revoke needs a head"):
        apply(MemGraph(), "revoke")


def test_revoke_head_tombstones_it_and_reinstates_predecessor():
    g = graph(("accept", "table"), ("accept", "shelf"))
    d = apply(g, "revoke")
    assert statuses(g) == {"table": "active", "shelf": "revoked"}
    assert g.versions[vid(g, "shelf")].tombstones == 1
    assert [type(e).__name__ for e in d.effects][-1] == "Reinstate"


def test_revoke_only_version_empties_the_cell():
    g = graph(("accept", "table"))
    apply(g, "revoke")
    assert g.head_value(K) is None and statuses(g) == {"table": "revoked"}


def test_revoke_contested_head_keeps_contest_open_against_predecessor():
    g = contested("a")
    apply(g, "revoke")
    assert statuses(g) == {"p": "contested", "h": "revoked", "a": "alternative"}


def test_revoke_non_head_version_leaves_head_unchanged():
    g = graph(("accept", "table"), ("accept", "shelf"))
    apply(g, "revoke", version=vid(g, "table"))
    assert statuses(g) == {"table": "revoked", "shelf": "active"}


def test_revoke_last_alternative_makes_cell_active_again():
    g = contested("a")
    apply(g, "revoke", version=vid(g, "a"))
    assert statuses(g) == {"p": "superseded", "h": "active", "a": "revoked"}


def test_revoke_one_of_two_alternatives_keeps_cell_contested():
    g = contested("a", "b")
    apply(g, "revoke", version=vid(g, "a"))
    assert statuses(g)["h"] == "contested" and statuses(g)["b"] == "alternative"


def test_revoke_of_already_revoked_version_is_invalid():
    g = graph(("accept", "table"), ("accept", "shelf"))
    apply(g, "revoke", version=vid(g, "table"))
    with pytest.raises(InvalidOperation, match="already revoked"):
        apply(g, "revoke", version=vid(g, "table"))


def test_revoke_of_unknown_version_is_invalid():
    g = graph(("accept", "table"))
    with pytest.raises(InvalidOperation, match="not a version of this key"):
        apply(g, "revoke", version=999)


# --- resolve ---------------------------------------------------------------------------------


def test_resolve_on_empty_or_active_cell_is_invalid():
    with pytest.raises(InvalidOperation, match="contested"):
        apply(MemGraph(), "resolve", "x")
    with pytest.raises(InvalidOperation, match="contested"):
        apply(graph(("accept", "table")), "resolve", "table")


def test_resolve_to_head_contradicts_alternatives():
    g = contested("a", "b")
    apply(g, "resolve", version=vid(g, "h"))
    assert statuses(g) == {"p": "superseded", "h": "active", "a": "contradicted",
                           "b": "contradicted"}


def test_resolve_to_alternative_contradicts_others_and_supersedes_head():
    g = contested("a", "b")
    apply(g, "resolve", "B")
    assert statuses(g) == {"p": "superseded", "h": "contradicted", "a": "contradicted",
                           "b": "active"}
    assert g.versions[vid(g, "b")].supersedes_id == vid(g, "h")


def test_retracting_resolved_alternative_walks_past_contradicted_head():
    g = contested("a")
    apply(g, "resolve", "a")
    apply(g, "revoke")
    assert g.head_value(K) == "p"


def test_resolve_to_unknown_value_is_invalid():
    with pytest.raises(InvalidOperation, match="neither the head nor an alternative"):
        apply(contested("a"), "resolve", "zzz")


# --- noop ------------------------------------------------------------------------------------


def test_noop_on_empty_cell_is_invalid():
    with pytest.raises(InvalidOperation, match="noop needs a head"):
        apply(MemGraph(), "noop")


def test_noop_supports_head_without_changing_status():
    g = contested("a")
    apply(g, "noop")
    assert g.versions[vid(g, "h")].support == 2 and statuses(g)["h"] == "contested"


# --- rollback (SPEC §4) -----------------------------------------------------------------------


def test_rollback_skips_revoked_and_contradicted_predecessors():
    g = graph(("accept", "v1"), ("accept", "v2"), ("reject", "v3"), ("accept", "v4"))
    apply(g, "revoke")  # v4 → v3 reinstated
    assert g.head_value(K) == "v3"
    apply(g, "revoke")  # v3 → v2 is contradicted: skip to v1
    assert g.head_value(K) == "v1"


def test_k_retractions_reinstate_value_from_before_k_most_recent_commits():
    g = graph(*(("accept", f"v{i}") for i in range(1, 7)))
    for k in range(1, 6):
        apply(g, "revoke")
        assert g.head_value(K) == f"v{6 - k}"
    apply(g, "revoke")
    assert g.head_value(K) is None


def test_rollback_never_creates_a_version():
    g = graph(("accept", "v1"), ("accept", "v2"))
    before = {i: v.value for i, v in g.versions.items()}
    apply(g, "revoke")
    assert {i: v.value for i, v in g.versions.items()} == before


def test_value_comparison_ignores_whitespace_and_case():
    g = graph(("accept", "Counter  Top 2"))
    assert not apply(g, "accept", "counter top 2").applied


def test_late_report_is_placed_in_history_without_touching_the_head():
    from memory.domain import CellState, Status, VersionView, decide_late

    state = CellState(head=VersionView(5, "Lisbon", Status.ACTIVE, 3))
    d = decide_late(state, "Madrid", 3)
    assert d.head_id == 5 and len(d.effects) == 1
    assert d.effects[0].status == Status.SUPERSEDED and d.effects[0].supersedes_id == 3
    assert not decide_late(state, "lisbon", 3).applied  # the head's value: support only
