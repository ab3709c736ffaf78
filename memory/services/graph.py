"""Applying typed operations to the graph in PostgreSQL (SPEC §3, §4).

Every write to a cell happens here, inside a transaction that holds the cell's row lock:
lock the cell, read its state, ask the pure state machine (:func:`memory.domain.decide`)
for the effects, write them, move the head pointer and write the operation row. The partial
unique index ``one_head_per_key`` backs the invariant, so a bug raises IntegrityError
instead of leaving a key with two current values.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from memory.domain import (
    HEAD_STATUSES,
    NEW,
    CellState,
    Decision,
    InvalidOperation,
    LinkSupersedes,
    NewVersion,
    OpRequest,
    OpType,
    Reinstate,
    Retype,
    Status,
    Support,
    Tombstone,
    VersionView,
    decide,
    normalize_key,
)
from memory.domain.model import OPEN_STATUSES
from memory.models import Cell, Evidence, KeyAlias, Namespace, Operation, SupportEdge, Version
from memory.models import Tombstone as TombstoneRow

log = logging.getLogger("pmem.graph")

#: Operations that may create a cell for a key never seen before.
CREATING_OPS = frozenset({OpType.ACCEPT, OpType.REJECT})


class CellNotFound(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(f"no cell with key {key!r}")
        self.key = key


@dataclass(frozen=True)
class Applied:
    """The outcome of one operation: its log row, the cell after it, and what changed."""

    operation: Operation
    cell: Cell | None
    decision: Decision | None
    invalid: str | None = None
    reinstated: tuple[int, ...] = field(default=())

    @property
    def head_changed(self) -> bool:
        return self.decision is not None and self.decision.applied


@dataclass(frozen=True)
class OpInput:
    """One operation to apply, as the services receive it."""

    key: str
    op: OpType
    value: str | None = None
    version_id: int | None = None
    reason: str = ""
    raw_output: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    payload: dict[str, Any] = field(default_factory=dict)


def operation_apply(
    *,
    namespace: Namespace,
    key: str,
    op: OpType | str,
    actor: str,
    value: str | None = None,
    version_id: int | None = None,
    evidence: Evidence | None = None,
    reason: str = "",
    explicit: bool = False,
) -> Applied:
    """Apply one typed operation to one key in its own transaction.

    With ``explicit=True`` (a person or API client asked for exactly this operation), an
    operation that is invalid in the cell's state raises :class:`InvalidOperation` and
    nothing is written; a missing key raises :class:`CellNotFound` unless the operation
    can create it. Otherwise an invalid operation is recorded as a noop with its reason.
    Takes the cell's row lock for the rest of the transaction.
    """
    item = OpInput(key=key, op=OpType(op), value=value, version_id=version_id, reason=reason)
    with transaction.atomic():
        return apply_in_transaction(namespace=namespace, item=item, actor=actor,
                                    evidence=evidence, explicit=explicit)


def apply_in_transaction(
    *,
    namespace: Namespace,
    item: OpInput,
    actor: str,
    evidence: Evidence | None = None,
    explicit: bool = False,
) -> Applied:
    """Apply ``item`` inside the caller's transaction (which must be open)."""
    assert connection.in_atomic_block, "apply_in_transaction needs an open transaction"
    key = normalize_key(item.key)
    cell = _lock_cell(namespace, key, create=item.op in CREATING_OPS and bool(item.value))
    if cell is None:
        if explicit:
            raise CellNotFound(key)
        reason = f"invalid: {item.op} needs a head (no cell {key!r})"
        return Applied(_log_noop(namespace, None, key, item, actor, evidence, reason), None, None,
                       invalid=reason)
    state = _load_state(cell, item)
    try:
        decision = decide(state, OpRequest(item.op, item.value, item.version_id))
    except InvalidOperation as exc:
        if explicit:
            raise
        return Applied(_log_noop(namespace, cell, key, item, actor, evidence, exc.reason), cell,
                       None, invalid=exc.reason)
    return _write(namespace, cell, state, decision, item, actor, evidence)


# --- reading the locked state ---------------------------------------------------------------


def _lock_cell(namespace: Namespace, key: str, *, create: bool) -> Cell | None:
    cell = Cell.objects.select_for_update().filter(namespace=namespace, key=key).first()
    if cell is not None:
        return cell
    alias = KeyAlias.objects.filter(namespace=namespace, alias=key).values_list("cell_id", flat=True)
    alias_cell_id = alias.first()
    if alias_cell_id is not None:
        return Cell.objects.select_for_update().get(pk=alias_cell_id)
    if not create:
        return None
    # Two writers may create the same key at once: insert-or-ignore, then lock what won.
    Cell.objects.bulk_create([Cell(namespace=namespace, key=key)], ignore_conflicts=True)
    return Cell.objects.select_for_update().get(namespace=namespace, key=key)


def _view(v: Version) -> VersionView:
    return VersionView(v.id, v.value, Status(v.status), v.supersedes_id)


def _load_state(cell: Cell, item: OpInput) -> CellState:
    """Head, alternatives (oldest first), a named target, and — only for a retraction of
    the head — the head's predecessors as far as rollback can need them."""
    wanted = Q(status__in=[s.value for s in OPEN_STATUSES])
    if item.version_id is not None:
        wanted |= Q(pk=item.version_id)
    rows = list(Version.objects.filter(wanted, cell=cell).order_by("id"))
    head = next((_view(v) for v in rows if v.status in HEAD_STATUSES), None)
    alternatives = tuple(_view(v) for v in rows if v.status == Status.ALTERNATIVE)
    target = next((_view(v) for v in rows if v.id == item.version_id), None)
    predecessors: tuple[VersionView, ...] = ()
    retracts_head = item.op in (OpType.REVOKE, OpType.REJECT) and (
        (item.op == OpType.REVOKE and (item.version_id is None or (head and item.version_id == head.id)))
        or (item.op == OpType.REJECT and not (item.value and item.value.strip()))
    )
    if head is not None and retracts_head and head.supersedes_id is not None:
        predecessors = predecessors_of(head.supersedes_id)
    return CellState(head, alternatives, predecessors, target)


_PREDECESSORS_SQL = """
WITH RECURSIVE chain AS (
    SELECT id, value, status, supersedes_id, 0 AS depth
      FROM memory_version WHERE id = %s
    UNION ALL
    SELECT v.id, v.value, v.status, v.supersedes_id, c.depth + 1
      FROM memory_version v JOIN chain c ON v.id = c.supersedes_id
     WHERE c.status IN ('revoked', 'contradicted')
)
SELECT id, value, status, supersedes_id FROM chain ORDER BY depth
"""


def predecessors_of(first_id: int) -> tuple[VersionView, ...]:
    """The supersedes chain from ``first_id`` backward, stopping at the first version that
    rollback may reinstate — one query, no walk over the rest of the history."""
    with connection.cursor() as cur:
        cur.execute(_PREDECESSORS_SQL, [first_id])
        return tuple(VersionView(r[0], r[1], Status(r[2]), r[3]) for r in cur.fetchall())


# --- writing the effects --------------------------------------------------------------------


def _valid_from(evidence: Evidence | None, now: datetime) -> datetime:
    if evidence is not None and evidence.observed_at is not None:
        return evidence.observed_at
    return now


def _allocate_ids(n_versions: int, n_operations: int) -> tuple[list[int], list[int]]:
    """Take ids from the sequences up front so rows can reference each other in one pass."""
    parts = ["nextval('memory_version_id_seq')"] * n_versions + [
        "nextval('memory_operation_id_seq')"
    ] * n_operations
    with connection.cursor() as cur:
        cur.execute("SELECT " + ", ".join(parts))
        ids = list(cur.fetchone())
    return ids[:n_versions], ids[n_versions:]


def _effects_json(decision: Decision, new_id: int | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for e in decision.effects:
        row: dict[str, Any] = {"effect": type(e).__name__}
        for name, val in vars(e).items():
            row[name] = new_id if val == NEW and name.endswith("id") else (
                str(val) if isinstance(val, Status) else val)
        out.append(row)
    return out


def _write(namespace: Namespace, cell: Cell, state: CellState, decision: Decision,
           item: OpInput, actor: str, evidence: Evidence | None) -> Applied:
    now = timezone.now()
    new_effect = next((e for e in decision.effects if isinstance(e, NewVersion)), None)
    reinstates = [e for e in decision.effects if isinstance(e, Reinstate)]
    version_ids, op_ids = _allocate_ids(1 if new_effect else 0, 1 + len(reinstates))
    new_id = version_ids[0] if version_ids else None
    head_after = new_id if decision.head_id == NEW else decision.head_id
    op_type = decision.op if decision.applied else OpType.NOOP
    target = new_id or _first_touched(decision) or head_after
    operation = Operation(
        id=op_ids[0], namespace=namespace, cell=cell, key=cell.key, type=op_type,
        requested=item.op, actor=actor, evidence=evidence,
        seq=evidence.seq if evidence is not None else None, version_id=target, value=item.value,
        reason=item.reason or decision.note, raw_output=item.raw_output,
        prompt_tokens=item.prompt_tokens, completion_tokens=item.completion_tokens,
        payload={**item.payload, "requested": str(item.op), "value": item.value,
                 "version": item.version_id,
                 "head_before": state.head.id if state.head else None, "head_after": head_after,
                 "effects": _effects_json(decision, new_id)},
    )
    operation.save(force_insert=True)

    # Order matters for the partial unique index: demote first, then install the new head.
    demotions = [e for e in decision.effects
                 if isinstance(e, Retype) and e.status not in HEAD_STATUSES]
    promotions = [e for e in decision.effects
                  if isinstance(e, Retype | Reinstate) and e.status in HEAD_STATUSES]
    _retype(demotions, now)
    if new_effect is not None:
        Version.objects.bulk_create([Version(
            id=new_id, namespace=namespace, cell=cell, value=new_effect.value,
            status=new_effect.status, valid_from=_valid_from(evidence, now), support=1,
            created_by=operation, supersedes_id=new_effect.supersedes_id,
            alternative_of_id=new_effect.alternative_of_id,
        )])
    _retype(promotions, now)
    for e in decision.effects:
        if isinstance(e, LinkSupersedes):
            Version.objects.filter(pk=e.version_id).update(supersedes_id=e.supersedes_id)
    supported = [e.version_id for e in decision.effects if isinstance(e, Support)]
    if supported:
        Version.objects.filter(pk__in=supported).update(support=F("support") + 1)
    edge_targets = supported + ([new_id] if new_id is not None else [])
    if edge_targets:
        SupportEdge.objects.bulk_create([
            SupportEdge(version_id=v, evidence=evidence, operation=operation) for v in edge_targets
        ])
    tombs = [TombstoneRow(version_id=e.version_id, operation=operation)
             for e in decision.effects if isinstance(e, Tombstone)]
    if tombs:
        TombstoneRow.objects.bulk_create(tombs)
    reinstated = _log_reinstatements(namespace, cell, reinstates, op_ids[1:], actor, evidence, operation)
    if head_after != cell.head_id:
        cell.head_id = head_after
        Cell.objects.filter(pk=cell.pk).update(head_id=head_after, updated_at=now)
    return Applied(operation, cell, decision, reinstated=reinstated)


def _first_touched(decision: Decision) -> int | None:
    """The existing version an operation acted on first (its log row points there)."""
    for e in decision.effects:
        if isinstance(e, Tombstone | Support | Retype | Reinstate):
            return e.version_id
    return None


def _retype(effects: list[Retype | Reinstate], now: datetime) -> None:
    """One UPDATE per target status; intervals close on leaving the open statuses and
    reopen on returning (a reinstated version's interval reopens, SPEC §4)."""
    by_status: dict[Status, list[int]] = {}
    for e in effects:
        by_status.setdefault(e.status, []).append(e.version_id)
    for status, ids in by_status.items():
        if status in OPEN_STATUSES:
            Version.objects.filter(pk__in=ids).update(status=status, valid_to=None)
        else:
            Version.objects.filter(pk__in=ids).update(
                status=status, valid_to=Coalesce("valid_to", now))


def _log_reinstatements(namespace: Namespace, cell: Cell, reinstates: list[Reinstate],
                        ids: list[int], actor: str, evidence: Evidence | None,
                        cause: Operation) -> tuple[int, ...]:
    if not reinstates:
        return ()
    Operation.objects.bulk_create([
        Operation(id=op_id, namespace=namespace, cell=cell, key=cell.key,
                  type=Operation.Type.REINSTATE, requested=cause.requested, actor=actor,
                  evidence=evidence, seq=cause.seq, version_id=e.version_id,
                  reason=f"rollback after operation {cause.id}",
                  payload={"cause": cause.id, "status": str(e.status)})
        for e, op_id in zip(reinstates, ids, strict=True)
    ])
    return tuple(e.version_id for e in reinstates)


def _log_noop(namespace: Namespace, cell: Cell | None, key: str, item: OpInput, actor: str,
              evidence: Evidence | None, reason: str) -> Operation:
    return Operation.objects.create(
        namespace=namespace, cell=cell, key=key, type=Operation.Type.NOOP, requested=item.op,
        actor=actor, evidence=evidence, seq=evidence.seq if evidence is not None else None,
        value=item.value, reason=reason, raw_output=item.raw_output,
        prompt_tokens=item.prompt_tokens, completion_tokens=item.completion_tokens,
        payload={**item.payload, "requested": str(item.op), "value": item.value,
                 "version": item.version_id, "invalid": reason},
    )
