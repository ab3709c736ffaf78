"""Undo (SPEC §3): the compensating typed operation of a person's operation.

Nothing is ever taken back out of the graph: an undo is one more audited operation (or a few)
that brings the cell back to what it showed before —

- a retraction (``revoke``) of the head or a rejection (``reject``) is undone by ``restore`` of
  the version it revoked or contradicted; the retraction of an alternative by contesting with
  its value again; the retraction of a closed (superseded) version has no undo — restoring it
  would make it current, which it was not (the Restore button does that, on purpose);
- a resolution is undone by contesting the head again with each value it contradicted;
- an ``accept``, a ``contest`` or a ``restore`` is undone by retracting the version it
  installed (created or promoted);
- an operation that changed nothing (a noop, a support) has nothing to undo.

:func:`compensation` reads only the operation's type, the version its log row points at and
its payload: the effects the writer logged there, read back by
:func:`memory.domain.effect_log.logged_effects`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .effect_log import RETYPE, logged_effects
from .vocabulary import OpType, Status


@dataclass(frozen=True)
class Compensation:
    """One operation of an undo. ``version_id`` is the version to restore or retract, or, for
    ``contest``, the version whose value contests the head again."""

    op: OpType
    version_id: int


def compensation(op_type: str, version_id: int | None,
                 payload: Mapping[str, Any]) -> tuple[Compensation, ...]:
    """The operations that undo an applied operation of type ``op_type`` (empty: nothing to
    undo). ``version_id`` is the operation row's version, ``payload`` its logged payload (its
    effects, ``head_before``, ``target_status``)."""
    retyped: list[tuple[int, str | None]] = [
        (e.version_id, e.status) for e in logged_effects(payload)
        if e.name == RETYPE and e.version_id is not None]
    if op_type == OpType.REVOKE and version_id is not None:
        if payload.get("target_status") == Status.ALTERNATIVE:
            return (Compensation(OpType.CONTEST, version_id),)  # a competing value again
        if "head_before" in payload and payload["head_before"] != version_id:
            return ()  # a closed version: restoring it would make it current, which undo never does
        return (Compensation(OpType.RESTORE, version_id),)
    if op_type == OpType.REJECT:
        return tuple(Compensation(OpType.RESTORE, vid) for vid, status in retyped
                     if status == Status.CONTRADICTED)[:1]
    if op_type == OpType.RESOLVE:
        return tuple(Compensation(OpType.CONTEST, vid) for vid, status in retyped
                     if status == Status.CONTRADICTED)
    if op_type in (OpType.ACCEPT, OpType.CONTEST, OpType.RESTORE) and version_id is not None:
        return (Compensation(OpType.REVOKE, version_id),)
    return ()


def undo_label(op_type: str) -> str:
    """What the Undo button of an operation does, in a reviewer's words."""
    return {
        OpType.REVOKE: "Undo: restore the retracted version",
        OpType.REJECT: "Undo: restore the rejected value",
        OpType.RESOLVE: "Undo: reopen the contest",
        OpType.ACCEPT: "Undo: retract this value",
        OpType.CONTEST: "Undo: retract the alternative",
        OpType.RESTORE: "Undo: retract the restored value",
    }.get(op_type, "Undo")  # type: ignore[call-overload]
