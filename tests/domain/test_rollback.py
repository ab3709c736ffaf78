"""The rollback walk rule (SPEC §4), stated once and used by every store."""

from __future__ import annotations

import pytest

from memory.domain import OpType, Status, VersionView
from memory.domain.rollback import retracts_head, rollback_chain, walks_past


def test_a_rollback_walks_past_retracted_versions_only():
    assert {s for s in Status if walks_past(s)} == {Status.REVOKED, Status.CONTRADICTED}


@pytest.mark.parametrize(("op", "value", "version_id", "expected"), [
    (OpType.REVOKE, None, None, True),
    (OpType.REVOKE, None, 5, True),  # naming the head
    (OpType.REVOKE, None, 3, False),  # a non-head version: no walk
    (OpType.REJECT, None, None, True),
    (OpType.REJECT, " ", None, True),
    (OpType.REJECT, "x", None, False),  # a reject with a value replaces the head
    (OpType.ACCEPT, "x", None, False),
])
def test_only_a_retraction_of_the_head_needs_its_predecessors(op, value, version_id, expected):
    assert retracts_head(op, value, version_id, head_id=5) is expected
    assert retracts_head(op, value, version_id, head_id=None) is False


def test_the_chain_stops_at_the_first_version_a_rollback_may_reinstate():
    versions = {
        4: VersionView(4, "d", Status.REVOKED, 3),
        3: VersionView(3, "c", Status.CONTRADICTED, 2),
        2: VersionView(2, "b", Status.SUPERSEDED, 1),
        1: VersionView(1, "a", Status.SUPERSEDED, None),
    }
    looked_up: list[int] = []

    def version(i: int) -> VersionView:
        looked_up.append(i)
        return versions[i]

    assert [v.id for v in rollback_chain(4, version)] == [4, 3, 2]
    assert looked_up == [4, 3, 2]  # never past the one it may reinstate
    assert rollback_chain(None, version) == ()
    assert [v.id for v in rollback_chain(2, version)] == [2]
