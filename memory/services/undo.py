"""Undo: a person's operation compensated by typed operations — restore, contest
or retract (:mod:`memory.domain.undo`) — applied like any other person's operations, in one
transaction, each in the log with the actor, the reason and the operation it undoes."""

from __future__ import annotations

from functools import partial

from django.db import transaction

from memory.domain import REINSTATE, InvalidOperation, OpInput, OpType
from memory.domain.undo import compensation
from memory.models import Namespace, Operation, Version

from .batch import Applied
from .carry import carry_evidence
from .graph import apply_batch, refresh_embedding


class NotUndoable(InvalidOperation):
    """The operation changed nothing that an operation could compensate."""


def operation_undo(*, namespace: Namespace, operation_id: int, actor: str,
                   reason: str = "") -> list[Applied]:
    """Undo operation ``operation_id`` of ``namespace`` with its compensating operations, in
    one transaction (all or none), signed by ``actor``; each carries ``payload.undoes``.
    Raises :class:`Operation.DoesNotExist` for another namespace's or an unknown operation,
    :class:`NotUndoable` when it changed nothing, and :class:`InvalidOperation` (nothing
    written) when the cell has moved on so that a compensation is no longer defined (the
    version was restored already, the contest reopened, …). Takes the cell's row lock."""
    operation = Operation.objects.get(namespace=namespace, pk=operation_id)
    if operation.type in (REINSTATE, OpType.NOOP):
        raise NotUndoable(f"invalid: operation {operation_id} changed nothing to undo")
    steps = compensation(operation.type, operation.version_id, operation.payload)
    if not steps:
        raise NotUndoable(f"invalid: operation {operation_id} changed nothing to undo")
    values = dict(Version.objects.filter(pk__in=[s.version_id for s in steps if
                                                  s.op == OpType.CONTEST])
                  .values_list("id", "value"))
    why = reason or f"undo of operation {operation_id}"
    items = [(OpInput(key=operation.key, op=s.op, version_id=None if s.op == OpType.CONTEST
                      else s.version_id, value=values.get(s.version_id), reason=why,
                      payload={"undoes": operation_id, **({"reopens": s.version_id}
                                                           if s.op == OpType.CONTEST else {})}),
              actor) for s in steps]
    with transaction.atomic():
        applied = apply_batch(namespace=namespace, items=items, explicit=True)
        # A value back in the contest is the contradicted version's value: it keeps that
        # version's evidence and metadata, as a restore keeps x's.
        carry_evidence([(one.operation.version_id, step.version_id, one.operation.pk)
                        for one, step in zip(applied, steps, strict=True)
                        if step.op == OpType.CONTEST and one.head_changed
                        and one.operation.version_id not in (None, step.version_id)])
    for one in applied:
        transaction.on_commit(partial(refresh_embedding, one))
    return applied
