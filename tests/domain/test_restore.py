"""SPEC §3 ``restore``: the undo of a retraction or rejection, one test per cell state and
per refusal, on the pure core."""

from __future__ import annotations

import pytest

from memory.domain import InvalidOperation, OpRequest, OpType, Status
from memory.domain.memgraph import MemGraph

K = "home_city"


def apply(g: MemGraph, op: str, value: str | None = None, version: int | None = None,
          evidence: int | None = None):
    return g.apply(K, OpRequest(OpType(op), value, version), evidence)


def vid(g: MemGraph, value: str, status: str | None = None) -> int:
    return next(v.id for v in g.versions.values()
                if v.value == value and (status is None or v.status == status))


def test_restore_after_retracting_the_head_brings_its_value_back_as_a_new_version():
    g = MemGraph()
    apply(g, "accept", "Paris", evidence=1)
    apply(g, "accept", "Tokyo", evidence=2)
    apply(g, "revoke")
    tokyo = vid(g, "Tokyo")
    d = apply(g, "restore", version=tokyo)
    assert d.op == OpType.RESTORE and d.applied
    assert g.head_value(K) == "Tokyo"
    new = g.versions[g.heads[K]]
    assert new.id != tokyo and new.restores_id == tokyo
    assert g.versions[tokyo].status == Status.REVOKED  # the mistake stays in the graph
    assert new.supersedes_id == vid(g, "Paris")
    assert g.versions[vid(g, "Paris")].status == Status.SUPERSEDED
    # it carries the restored version's evidence: its own edge plus evidence 2
    assert new.evidence == [None, 2] and new.support == 2


def test_restore_after_a_rejection_brings_the_contradicted_value_back():
    g = MemGraph()
    apply(g, "accept", "a")
    apply(g, "reject", "b")
    a = vid(g, "a")
    assert g.versions[a].status == Status.CONTRADICTED
    apply(g, "restore", version=a)
    assert g.head_value(K) == "a"
    assert g.versions[vid(g, "b")].status == Status.SUPERSEDED


def test_restore_into_an_empty_cell_creates_the_head():
    g = MemGraph()
    apply(g, "accept", "only")
    apply(g, "revoke")
    assert g.head_value(K) is None
    apply(g, "restore", version=1)
    head = g.versions[g.heads[K]]
    assert head.value == "only" and head.status == Status.ACTIVE and head.supersedes_id is None


def test_restore_of_a_value_equal_to_the_head_only_supports_it():
    g = MemGraph()
    apply(g, "accept", "a")
    apply(g, "accept", "b")
    apply(g, "revoke", version=1)  # revoke the old 'a'
    apply(g, "accept", "A ")
    before = len(g.versions)
    d = apply(g, "restore", version=1)
    assert not d.applied and len(g.versions) == before
    assert g.versions[g.heads[K]].support == 2


def test_restore_in_a_contested_cell_closes_the_contest_like_accept():
    g = MemGraph()
    apply(g, "accept", "p")
    apply(g, "accept", "x")
    apply(g, "revoke")  # x revoked, p head again
    apply(g, "contest", "q")
    apply(g, "restore", version=vid(g, "x"))
    assert g.head_value(K) == "x"
    assert g.versions[vid(g, "q")].status == Status.SUPERSEDED
    assert g.versions[vid(g, "p")].status == Status.SUPERSEDED


def test_restore_of_a_value_an_alternative_holds_promotes_that_alternative():
    g = MemGraph()
    apply(g, "accept", "p")
    apply(g, "accept", "x")
    apply(g, "revoke")
    apply(g, "contest", "x")  # the same value, contesting again
    alt = vid(g, "x", "alternative")
    n = len(g.versions)
    apply(g, "restore", version=vid(g, "x", "revoked"))
    assert len(g.versions) == n and g.heads[K] == alt
    assert g.versions[alt].status == Status.ACTIVE


@pytest.mark.parametrize("status_op", ["superseded", "active", "alternative"])
def test_restore_of_a_version_that_is_not_retracted_is_invalid(status_op):
    g = MemGraph()
    apply(g, "accept", "a")
    apply(g, "accept", "b")
    apply(g, "contest", "c")
    target = {"superseded": vid(g, "a"), "active": vid(g, "b"),
              "alternative": vid(g, "c")}[status_op]
    with pytest.raises(InvalidOperation, match="revoked or contradicted"):
        apply(g, "restore", version=target)


def test_restore_without_a_version_or_of_another_keys_version_is_invalid():
    g = MemGraph()
    apply(g, "accept", "a")
    with pytest.raises(InvalidOperation, match="needs the version"):
        apply(g, "restore")
    g.apply("other", OpRequest(OpType.ACCEPT, "z"))
    g.apply("other", OpRequest(OpType.REVOKE))
    with pytest.raises(InvalidOperation, match="not a version of this key"):
        apply(g, "restore", version=2)


def test_retracting_a_restored_value_rolls_back_past_it_to_the_head_before_the_restore():
    g = MemGraph()
    apply(g, "accept", "a")
    apply(g, "accept", "b")
    apply(g, "revoke")
    apply(g, "restore", version=vid(g, "b"))
    apply(g, "revoke")
    assert g.head_value(K) == "a"


def test_reasons_and_methods_read_in_plain_words():
    from memory.domain.wording import plain_method, plain_reason

    assert plain_reason("rule: asserted") == "the observation states it"
    assert plain_reason("rollback after operation 12") == (
        "reopened because operation 12 retracted a newer value")
    assert plain_reason("invalid: resolve needs a contested cell") == (
        "refused — resolve needs a contested cell")
    assert plain_reason("the sensor was wrong") == "the sensor was wrong"
    assert plain_reason("rule: asserted; hard_commit") == "the observation states it (forced: hard commit)"
    assert plain_method("rule") == "decided by the rule extractor"


def test_word_diff_marks_removed_and_added_words_and_joins_back():
    from memory.domain.textdiff import word_diff

    left, right = word_diff("meets on Tuesday at 10", "meets on Thursday at 10")
    assert "".join(t for _, t in left) == "meets on Tuesday at 10"
    assert ("removed", "Tuesday") in left and ("added", "Thursday") in right
    assert word_diff("same", "same") == ([("same", "same")], [("same", "same")])
