"""Undo: every person's operation has a compensating typed operation, applied as
an ordinary audited operation; restore through the one write path on PostgreSQL."""

from __future__ import annotations

import pytest

from memory.domain import InvalidOperation
from memory.domain.undo import Compensation, compensation
from memory.models import Operation, Version
from memory.selectors.cells import cell_detail
from memory.services import NotUndoable, operation_apply, operation_undo

pytestmark = pytest.mark.django_db


def op(ns, kind, value=None, version=None, key="k"):
    return operation_apply(namespace=ns, key=key, op=kind, value=value, version_id=version,
                           actor="user:rev", explicit=True, reason="test").operation


def state(ns, key="k"):
    d = cell_detail(namespace=ns, key=key)
    alts = sorted(h["value"] for h in d.history if h["status"] == "alternative")
    return d.value, str(d.status), alts


def undo(ns, operation):
    return operation_undo(namespace=ns, operation_id=operation.pk, actor="user:rev")


def test_undo_of_a_retraction_restores_the_retracted_value(ns):
    op(ns, "accept", "a")
    op(ns, "accept", "b")
    revoke = op(ns, "revoke")
    assert state(ns) == ("a", "active", [])
    [applied] = undo(ns, revoke)
    assert applied.operation.type == "restore" and applied.operation.actor == "user:rev"
    assert applied.operation.payload["undoes"] == revoke.pk
    assert applied.operation.reason == f"undo of operation {revoke.pk}"
    assert state(ns) == ("b", "active", [])


def test_undo_of_a_rejection_with_a_value_restores_the_rejected_value(ns):
    op(ns, "accept", "a")
    reject = op(ns, "reject", "b")
    undo(ns, reject)
    assert state(ns) == ("a", "active", [])


def test_undo_of_a_resolution_reopens_the_contest_with_the_values_it_contradicted(ns):
    op(ns, "accept", "a")
    op(ns, "contest", "b")
    op(ns, "contest", "c")
    resolve = op(ns, "resolve", "b")
    assert state(ns) == ("b", "active", [])
    applied = undo(ns, resolve)
    assert [a.operation.type for a in applied] == ["contest", "contest"]
    assert state(ns) == ("b", "contested", ["a", "c"])


def test_undo_of_an_accept_retracts_it(ns):
    op(ns, "accept", "a")
    accept = op(ns, "accept", "b")
    undo(ns, accept)
    assert state(ns) == ("a", "active", [])


def test_undo_of_a_contest_retracts_the_alternative(ns):
    op(ns, "accept", "a")
    contest = op(ns, "contest", "b")
    undo(ns, contest)
    assert state(ns) == ("a", "active", [])


def test_undo_of_a_restore_retracts_the_restored_value(ns):
    op(ns, "accept", "a")
    op(ns, "accept", "b")
    revoke = op(ns, "revoke")
    [restored] = undo(ns, revoke)
    undo(ns, restored.operation)
    assert state(ns) == ("a", "active", [])


def test_undoing_twice_is_refused_with_the_reason_and_writes_nothing(ns):
    op(ns, "accept", "a")
    op(ns, "accept", "b")
    accept = op(ns, "accept", "c")
    undo(ns, accept)
    before = Operation.objects.count()
    with pytest.raises(InvalidOperation, match="already revoked"):
        undo(ns, accept)
    assert Operation.objects.count() == before


def test_a_support_or_a_rollback_row_has_nothing_to_undo(ns):
    op(ns, "accept", "a")
    support = op(ns, "accept", "A")
    assert support.type == "noop"
    with pytest.raises(NotUndoable):
        undo(ns, support)
    op(ns, "accept", "b")
    op(ns, "revoke")
    reinstate = Operation.objects.get(namespace=ns, type="reinstate")
    with pytest.raises(NotUndoable):
        undo(ns, reinstate)


def test_another_namespaces_operation_cannot_be_undone(ns, make_namespace):
    other = make_namespace()
    foreign = op(other, "accept", "x")
    with pytest.raises(Operation.DoesNotExist):
        undo(ns, foreign)


def test_compensation_reads_the_logged_effects():
    effects = [{"effect": "Retype", "version_id": 5, "status": "active"},
               {"effect": "Retype", "version_id": 3, "status": "contradicted"},
               {"effect": "Retype", "version_id": 4, "status": "contradicted"}]
    # Operations logged before the encoding carried its format number read as format 1.
    for payload in ({"effects": effects}, {"effects": effects, "effects_format": 1}):
        assert compensation("resolve", 5, payload) == (Compensation("contest", 3),
                                                       Compensation("contest", 4))
        assert compensation("noop", 5, payload) == ()
    assert compensation("revoke", 7, {}) == (Compensation("restore", 7),)


def test_a_restored_version_points_at_the_one_it_restores(ns):
    op(ns, "accept", "a")
    op(ns, "accept", "b")
    revoke = op(ns, "revoke")
    [restored] = undo(ns, revoke)
    new = Version.objects.get(pk=restored.operation.version_id)
    assert new.restores_id == revoke.version_id and new.value == "b"


def test_undo_of_retracting_an_alternative_contests_with_it_again(ns):
    op(ns, "accept", "a")
    op(ns, "contest", "b")
    b = Version.objects.get(cell__namespace=ns, value="b")
    revoke = op(ns, "revoke", version=b.pk)
    assert state(ns) == ("a", "active", [])
    [applied] = undo(ns, revoke)
    assert applied.operation.type == "contest"
    assert state(ns) == ("a", "contested", ["b"])


def test_retracting_a_closed_version_has_no_undo(ns):
    op(ns, "accept", "a")
    op(ns, "accept", "b")
    a = Version.objects.get(cell__namespace=ns, value="a")
    revoke = op(ns, "revoke", version=a.pk)
    with pytest.raises(NotUndoable):
        undo(ns, revoke)
    assert state(ns) == ("b", "active", [])
