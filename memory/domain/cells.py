"""The cell state machine of SPEC §3 and rollback of SPEC §4, as one pure function.

``decide(state, request)`` returns the effects an operation has on one cell, or raises
:class:`InvalidOperation` with the reason when the operation is not defined in the cell's
state. It never looks at anything but its arguments, so the same sequence of requests
always yields the same graph.
"""

from __future__ import annotations

from .model import (
    NEW,
    CellState,
    Decision,
    Effect,
    InvalidOperation,
    LinkSupersedes,
    NewVersion,
    OpRequest,
    Reinstate,
    Retype,
    Support,
    Tombstone,
    VersionView,
    same_value,
)
from .rollback import walks_past
from .vocabulary import RESTORABLE_STATUSES, OpType, Status


def decide(state: CellState, req: OpRequest) -> Decision:
    handler = _HANDLERS[req.op]
    return handler(state, req)


# --- helpers ------------------------------------------------------------------------------


def _need_value(req: OpRequest) -> str:
    if req.value is None or not req.value.strip():
        raise InvalidOperation(f"invalid: {req.op} needs a value")
    return req.value


def _find_alternative(state: CellState, value: str) -> VersionView | None:
    for alt in state.alternatives:
        if same_value(alt.value, value):
            return alt
    return None


def _support(op: OpType, version: VersionView, note: str) -> Decision:
    return Decision(op=op, effects=(Support(version.id),), head_id=_head_id_after_support(version),
                    applied=False, note=note)


def _head_id_after_support(version: VersionView) -> int:
    return version.id


def _reinstate(state: CellState, *, keep_contest: bool) -> tuple[list[Effect], int | None]:
    """Rollback (SPEC §4): the nearest predecessor that is neither revoked nor contradicted
    becomes the head again. In a contested cell the contest stays open against it; with no
    predecessor the oldest alternative takes the head instead; else the cell empties."""
    effects: list[Effect] = []
    alternatives = state.alternatives if keep_contest else ()
    for pred in state.predecessors:
        if walks_past(pred.status):
            continue
        status = Status.CONTESTED if alternatives else Status.ACTIVE
        effects.append(Reinstate(pred.id, status))
        return effects, pred.id
    if alternatives:
        first, rest = alternatives[0], alternatives[1:]
        status = Status.CONTESTED if rest else Status.ACTIVE
        effects.append(Retype(first.id, status))
        return effects, first.id
    return effects, None


def _install(state: CellState, value: str, *, head_becomes: Status,
             restores_id: int | None = None) -> tuple[list[Effect], int]:
    """Make ``value`` the active head over ``state.head`` (accept / reject with a value).

    The old head takes ``head_becomes`` (superseded or contradicted); in a contested cell the
    other alternatives are superseded. An alternative equal to ``value`` is promoted rather
    than duplicated."""
    head = state.head
    assert head is not None
    effects: list[Effect] = []
    promoted = _find_alternative(state, value) if head.status == Status.CONTESTED else None
    if promoted is not None:
        effects.append(Retype(promoted.id, Status.ACTIVE))
        effects.append(LinkSupersedes(promoted.id, head.id))
        effects.append(Support(promoted.id))
        new_head = promoted.id
    else:
        effects.append(NewVersion(value, Status.ACTIVE, supersedes_id=head.id,
                                  restores_id=restores_id))
        new_head = NEW
    effects.append(Retype(head.id, head_becomes))
    for alt in state.alternatives:
        if alt.id != new_head:
            effects.append(Retype(alt.id, Status.SUPERSEDED))
    return effects, new_head


def _create(op: OpType, value: str) -> Decision:
    return Decision(op=op, effects=(NewVersion(value, Status.ACTIVE),), head_id=NEW,
                    note="create")


# --- one handler per operation -------------------------------------------------------------


def _accept(state: CellState, req: OpRequest) -> Decision:
    value = _need_value(req)
    head = state.head
    if head is None:
        return _create(OpType.ACCEPT, value)
    if same_value(head.value, value):
        return _support(OpType.ACCEPT, head, "value equals the head: support")
    effects, new_head = _install(state, value, head_becomes=Status.SUPERSEDED)
    return Decision(op=OpType.ACCEPT, effects=tuple(effects), head_id=new_head)


def _reject(state: CellState, req: OpRequest) -> Decision:
    head = state.head
    if req.value is not None and req.value.strip():
        if head is None:
            return _create(OpType.REJECT, req.value)
        if same_value(head.value, req.value):
            raise InvalidOperation("invalid: reject value equals the head it rejects")
        installed, new_id = _install(state, req.value, head_becomes=Status.CONTRADICTED)
        return Decision(op=OpType.REJECT, effects=tuple(installed), head_id=new_id)
    if head is None:
        raise InvalidOperation("invalid: reject needs a head")
    effects: list[Effect] = [Retype(head.id, Status.CONTRADICTED)]
    more, new_head = _reinstate(state, keep_contest=True)
    return Decision(op=OpType.REJECT, effects=tuple(effects + more), head_id=new_head)


def _contest(state: CellState, req: OpRequest) -> Decision:
    value = _need_value(req)
    head = state.head
    if head is None:
        raise InvalidOperation("invalid: contest needs a head")
    if same_value(head.value, value):
        return _support(OpType.CONTEST, head, "value equals the head: support")
    existing = _find_alternative(state, value)
    if existing is not None:
        return Decision(op=OpType.CONTEST, effects=(Support(existing.id),), head_id=head.id,
                        applied=False, note="value equals an alternative: support")
    effects: list[Effect] = [NewVersion(value, Status.ALTERNATIVE, alternative_of_id=head.id)]
    if head.status != Status.CONTESTED:
        effects.append(Retype(head.id, Status.CONTESTED))
    return Decision(op=OpType.CONTEST, effects=tuple(effects), head_id=head.id)


def _revoke(state: CellState, req: OpRequest) -> Decision:
    head = state.head
    if req.version_id is not None and (head is None or req.version_id != head.id):
        return _revoke_non_head(state, req.version_id)
    if head is None:
        raise InvalidOperation("invalid: revoke needs a head (the cell is empty)")
    effects: list[Effect] = [Retype(head.id, Status.REVOKED), Tombstone(head.id)]
    more, new_head = _reinstate(state, keep_contest=True)
    return Decision(op=OpType.REVOKE, effects=tuple(effects + more), head_id=new_head)


def _revoke_non_head(state: CellState, version_id: int) -> Decision:
    target = next((a for a in state.alternatives if a.id == version_id), None)
    if target is None and state.target is not None and state.target.id == version_id:
        target = state.target
    if target is None:
        raise InvalidOperation(f"invalid: version {version_id} is not a version of this key")
    if target.status == Status.REVOKED:
        raise InvalidOperation(f"invalid: version {version_id} is already revoked")
    effects: list[Effect] = [Retype(target.id, Status.REVOKED), Tombstone(target.id)]
    head = state.head
    if (
        head is not None
        and target.status == Status.ALTERNATIVE
        and len(state.alternatives) == 1
    ):
        effects.append(Retype(head.id, Status.ACTIVE))  # the last alternative is gone
    return Decision(op=OpType.REVOKE, effects=tuple(effects),
                    head_id=head.id if head is not None else None)


def _resolve(state: CellState, req: OpRequest) -> Decision:
    head = state.head
    if head is None or head.status != Status.CONTESTED:
        raise InvalidOperation("invalid: resolve needs a contested cell")
    candidates = (head, *state.alternatives)
    winner: VersionView | None = None
    if req.version_id is not None:
        winner = next((c for c in candidates if c.id == req.version_id), None)
    elif req.value is not None:
        winner = next((c for c in candidates if same_value(c.value, req.value)), None)
    else:
        raise InvalidOperation("invalid: resolve needs the winning version or value")
    if winner is None:
        raise InvalidOperation("invalid: resolve target is neither the head nor an alternative")
    effects: list[Effect] = [Retype(winner.id, Status.ACTIVE)]
    if winner.id != head.id:
        # The promoted alternative supersedes the old head, so a later retraction of the
        # winner walks back past it (to the head's own predecessors).
        effects.append(LinkSupersedes(winner.id, head.id))
    for loser in candidates:
        if loser.id != winner.id:
            effects.append(Retype(loser.id, Status.CONTRADICTED))
    return Decision(op=OpType.RESOLVE, effects=tuple(effects), head_id=winner.id)


def _noop(state: CellState, req: OpRequest) -> Decision:
    if state.head is None:
        raise InvalidOperation("invalid: noop needs a head to support")
    return _support(OpType.NOOP, state.head, "support")


def _restore(state: CellState, req: OpRequest) -> Decision:
    """SPEC §3 ``restore``: the undo of a retraction or rejection. The revoked or contradicted
    version x is never changed; its value is installed as by accept — a new head that restores
    x and carries its evidence, or support of the head (or promotion of an alternative) when
    a version already holds that value (no duplicate versions)."""
    if req.version_id is None:
        raise InvalidOperation("invalid: restore needs the version to restore")
    target = state.target
    if target is None or target.id != req.version_id:
        raise InvalidOperation(f"invalid: version {req.version_id} is not a version of this key")
    if target.status not in RESTORABLE_STATUSES:
        raise InvalidOperation(
            f"invalid: restore needs a revoked or contradicted version "
            f"(version {target.id} is {target.status})")
    head = state.head
    if head is None:
        return Decision(op=OpType.RESTORE, head_id=NEW, note="restore into an empty cell",
                        effects=(NewVersion(target.value, Status.ACTIVE,
                                            restores_id=target.id),))
    if same_value(head.value, target.value):
        return _support(OpType.RESTORE, head, "value equals the head: support")
    effects, new_head = _install(state, target.value, head_becomes=Status.SUPERSEDED,
                                 restores_id=target.id)
    return Decision(op=OpType.RESTORE, effects=tuple(effects), head_id=new_head)


_HANDLERS = {
    OpType.ACCEPT: _accept,
    OpType.REJECT: _reject,
    OpType.CONTEST: _contest,
    OpType.REVOKE: _revoke,
    OpType.RESOLVE: _resolve,
    OpType.NOOP: _noop,
    OpType.RESTORE: _restore,
}


def decide_late(state: CellState, value: str, predecessor_id: int | None) -> Decision:
    """SPEC §8 valid time: a report whose valid time is older than the head's is placed in
    the history at its valid-time position (superseded, after ``predecessor_id``) and never
    becomes the head. A value equal to the head only supports it."""
    head = state.head
    if head is None:
        return _create(OpType.ACCEPT, value)
    if same_value(head.value, value):
        return _support(OpType.ACCEPT, head, "late report of the head's value: support")
    return Decision(op=OpType.ACCEPT,
                    effects=(NewVersion(value, Status.SUPERSEDED, supersedes_id=predecessor_id),),
                    head_id=head.id, note="late report: placed in history at its valid time")
