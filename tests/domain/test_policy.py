"""SPEC §8 (source trust, valid time) and the withdrawal rule, as pure functions."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory.domain import OpType, Status
from memory.domain.policy import (
    head_trust,
    is_late,
    outranked,
    replaces_head,
    valid_time_slot,
    withdrawn_target,
)


def day(d: int) -> datetime:
    return datetime(2026, 11, d, tzinfo=UTC)


@pytest.mark.parametrize(("op", "value", "has_head", "expected"), [
    (OpType.ACCEPT, "b", True, True),
    (OpType.REJECT, "b", True, True),
    (OpType.REJECT, None, True, False),  # a retraction replaces nothing
    (OpType.ACCEPT, "  ", True, False),
    (OpType.CONTEST, "b", True, False),
    (OpType.ACCEPT, "b", False, False),  # creating a cell replaces no head
])
def test_only_a_fact_that_would_replace_a_head_is_placed_by_trust_and_time(
        op, value, has_head, expected):
    assert replaces_head(op, value, has_head) is expected


def test_a_report_older_than_the_head_is_late_and_an_undated_one_is_not():
    assert is_late(day(1), day(5)) and not is_late(day(5), day(5))
    assert not is_late(None, day(5))


def test_a_late_report_goes_after_the_version_valid_before_it_and_ends_at_the_next():
    versions = [(day(1), 10), (day(20), 11), (day(10), -2)]  # -2: created in this batch
    assert valid_time_slot(versions, day(15)) == (-2, day(20))
    assert valid_time_slot(versions, day(5)) == (10, day(10))
    assert valid_time_slot(versions, day(25)) == (11, None)
    assert valid_time_slot(versions, day(1)) == (10, day(10))  # the same instant: after it
    assert valid_time_slot([(day(3), 7)], day(2)) == (None, day(3))


def test_the_heads_trust_is_its_best_supporting_source_and_unlisted_sources_count_zero():
    levels = {"registry": 10, "gossip": 1}
    assert head_trust(levels, ["gossip", "registry"]) == 10
    assert head_trust(levels, ["somebody"]) == 0
    assert head_trust(levels, []) == 0
    assert head_trust({}, ["registry"]) == 0  # no levels configured: every source is equal


def test_a_less_trusted_source_is_outranked_and_an_equal_one_is_not():
    assert outranked(1, 10) and not outranked(10, 10) and not outranked(3, 0)


def test_a_withdrawal_names_the_newest_version_holding_the_value_that_is_not_revoked():
    newest_first = [(9, "Cabinet 3", Status.REVOKED), (7, "cabinet  3", Status.SUPERSEDED),
                    (4, "cabinet 3", Status.SUPERSEDED)]
    assert withdrawn_target(newest_first, "CABINET 3") == 7
    assert withdrawn_target(newest_first, "shelf") is None
    assert withdrawn_target(newest_first, None) is None
    assert withdrawn_target(iter(()), "x") is None
