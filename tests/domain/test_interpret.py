"""The one effect interpreter: what it asks of a store, in which order, and what it reports."""

from __future__ import annotations

from memory.domain import (
    NEW,
    Decision,
    LinkSupersedes,
    NewVersion,
    OpType,
    Reinstate,
    Retype,
    Status,
    Support,
    Tombstone,
    interpret,
    valid_to_after,
)


class RecordingSink:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def create(self, effect: NewVersion) -> int:
        self.calls.append(("create", effect.value))
        return 42

    def retype(self, version_id: int, status: Status) -> None:
        self.calls.append(("retype", version_id, status))

    def link_supersedes(self, version_id: int, supersedes_id: int) -> None:
        self.calls.append(("link", version_id, supersedes_id))

    def support(self, version_id: int) -> None:
        self.calls.append(("support", version_id))

    def tombstone(self, version_id: int) -> None:
        self.calls.append(("tombstone", version_id))

    def move_head(self, version_id: int | None) -> None:
        self.calls.append(("head", version_id))


def test_a_new_version_is_supported_by_its_operation_and_becomes_the_head():
    sink = RecordingSink()
    outcome = interpret(Decision(OpType.ACCEPT, (NewVersion("b", Status.ACTIVE, 1),
                                                 Retype(1, Status.SUPERSEDED)), NEW), sink)
    assert sink.calls == [("create", "b"), ("support", 42), ("retype", 1, Status.SUPERSEDED),
                          ("head", 42)]
    assert (outcome.new_id, outcome.head_after, outcome.supported) == (42, 42, (42,))
    assert outcome.version_ref == 42


def test_a_revoke_tombstones_and_reports_the_reinstated_predecessor():
    sink = RecordingSink()
    outcome = interpret(Decision(OpType.REVOKE, (Retype(5, Status.REVOKED), Tombstone(5),
                                                 Reinstate(3, Status.ACTIVE)), 3), sink)
    assert sink.calls == [("retype", 5, Status.REVOKED), ("tombstone", 5),
                          ("retype", 3, Status.ACTIVE), ("head", 3)]
    assert outcome.tombstoned == (5,) and outcome.reinstated == ((3, Status.ACTIVE),)
    assert outcome.version_ref == 5 and outcome.new_id is None


def test_a_promoted_alternative_is_linked_supported_and_logged_at_its_first_touch():
    sink = RecordingSink()
    outcome = interpret(Decision(OpType.ACCEPT, (Retype(7, Status.ACTIVE), LinkSupersedes(7, 5),
                                                 Support(7), Retype(5, Status.SUPERSEDED)), 7),
                        sink)
    assert ("link", 7, 5) in sink.calls and outcome.supported == (7,)
    assert outcome.version_ref == 7 and outcome.head_after == 7


def test_an_empty_decision_still_sets_the_head_it_names():
    sink = RecordingSink()
    assert interpret(Decision(OpType.REJECT, (), None), sink).head_after is None
    assert sink.calls == [("head", None)]


def test_an_interval_closes_when_its_version_leaves_the_open_statuses_and_reopens_after():
    assert valid_to_after(Status.SUPERSEDED, None, 9) == 9
    assert valid_to_after(Status.REVOKED, 4, 9) == 4  # an earlier end is kept
    assert valid_to_after(Status.ACTIVE, 4, 9) is None  # reinstated: open again
    assert valid_to_after(Status.ALTERNATIVE, None, 9) is None
