"""The vocabulary is the domain's: derived names agree with it."""

from __future__ import annotations

from memory.domain import (
    LOG_TYPES,
    CellStatus,
    OpType,
    Role,
    Status,
    cell_status,
    may_act,
)
from memory.domain.vocabulary import SUPERUSER


def test_a_cell_shows_its_heads_status_or_empty():
    assert cell_status(None) == CellStatus.EMPTY
    assert cell_status(Status.ACTIVE) == CellStatus.ACTIVE
    assert cell_status(Status.CONTESTED) == CellStatus.CONTESTED


def test_the_log_knows_every_operation_the_reinstatement_and_the_expiry():
    assert LOG_TYPES == (*(op.value for op in OpType), "reinstate", "expire")


def test_reviewers_and_superusers_act_and_viewers_only_see():
    assert may_act(Role.REVIEWER) and may_act(SUPERUSER) and not may_act(Role.VIEWER)
