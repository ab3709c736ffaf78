"""A batch: operations decided one after another on an overlay of the locked cells, then
written at once (SPEC §3, §4, §8).

Every write to a cell goes through a batch, inside a transaction that holds the row locks of
the cells it touches: a person's operation is a batch of one; an observation's facts are one
batch; a group of observations committed together is one batch of all their facts. Each
operation is placed by the source-trust and valid-time rules (:mod:`memory.domain.policy`,
observations only), decided by the pure state machine (:func:`memory.domain.decide`) on the
overlay's state, and applied to the overlay by the shared interpreter; :meth:`Batch.write`
then writes everything with one statement per table, whatever the number of operations.
The partial unique index ``one_head_per_key`` backs the invariant, so a bug raises
IntegrityError instead of leaving a key with two current values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cached_property
from typing import Any

from django.utils import timezone

from memory.domain import (
    NEW,
    Decision,
    InvalidOperation,
    Item,
    OpInput,
    OpRequest,
    OpType,
    Status,
    cell_status,
    decide,
    decide_late,
    interpret,
    normalize_key,
    policy,
)
from memory.llm.vectors import Vectors
from memory.models import Cell, Evidence, Namespace, Operation

from . import store
from .overlay import Overlay, VersionRow, locked_overlay
from .writer import PendingOp, reinstate_op, write


class CellNotFound(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(f"no cell with key {key!r}")
        self.key = key


@dataclass(frozen=True)
class Applied:
    """The outcome of one operation: its log row, the cell after it, and what changed."""

    #: Builds the log row's model instance; most commits (an observation's) never ask.
    load: Callable[[], Operation] = field(repr=False, compare=False)
    cell: Cell | None
    decision: Decision | None
    invalid: str | None = None
    reinstated: tuple[int, ...] = field(default=())
    #: The commit wrote the cell's ``key: value`` embedding itself (nothing to refresh after).
    embedded: bool = False
    evidence_id: int | None = None

    @cached_property
    def operation(self) -> Operation:
        return self.load()

    @property
    def head_changed(self) -> bool:
        return self.decision is not None and self.decision.applied


#: Where a late report goes: (the version valid just before it, when the next one began).
Slot = tuple[int | None, datetime | None]


class Batch:
    def __init__(self, namespace: Namespace, overlay: Overlay,
                 vectors: Vectors) -> None:
        self.namespace, self.overlay, self.vectors = namespace, overlay, vectors
        self.ops: list[PendingOp] = []
        self.evidence: Evidence | None = None
        self.now = timezone.now()
        self._levels: dict[str, int] | None = None

    @classmethod
    def open(cls, *, namespace: Namespace, keys: Sequence[str], creating: Sequence[str],
             vectors: Vectors | None = None,
             named: Sequence[int | None] = ()) -> Batch:
        """Lock the cells of ``keys`` (creating cells for ``creating``) inside the caller's
        transaction. ``vectors`` (text -> vector, computed before the transaction) let a
        head move carry the cell's new embedding; cells they miss are refreshed after
        commit."""
        now = timezone.now()
        normalized = [k for k in (normalize_key(k) for k in keys) if k]
        overlay = locked_overlay(namespace, normalized,
                                 {n for n in (normalize_key(k) for k in creating) if n},
                                 now, [i for i in named if i is not None])
        batch = cls(namespace, overlay, vectors or {})
        batch.now = now
        return batch

    def apply(self, items: Sequence[Item], *, evidence: Evidence | None = None,
              explicit: bool = False) -> None:
        """Decide ``items`` in order on the overlay. An observation's versions begin when it
        is applied, as if it were committed on its own (a group's rows share one
        ``created_at``). With ``explicit`` (a person or client asked for exactly these), an
        invalid operation raises and the caller's transaction must be rolled back."""
        self.evidence, self.now = evidence, timezone.now()
        self.overlay.load_named([item.version_id for item, _ in items])
        for item, actor in items:
            self._apply(normalize_key(item.key), item, actor, explicit=explicit)

    def _apply(self, key: str, item: OpInput, actor: str, *, explicit: bool) -> None:
        cell = self.overlay.cell(key, creating=item.creates)
        base = {**item.payload, "requested": str(item.op), "value": item.value,
                "version": item.version_id}
        if cell is None:
            if explicit:
                raise CellNotFound(key)
            self._refuse(key, None, item, actor, base,
                         f"invalid: {item.op} needs a head (no cell {key!r})")
            return
        slot: Slot | None = None
        if not explicit and self.evidence is not None:
            item, slot = self._place(cell, item)
        try:
            state = self.overlay.state(cell, item)
            decision = (decide_late(state, item.value or "", slot[0]) if slot is not None
                        else decide(state, OpRequest(item.op, item.value, item.version_id)))
        except InvalidOperation as exc:
            if explicit:
                raise
            self._refuse(cell.key, cell, item, actor, base, exc.reason)
            return
        new_id = self._record(cell, item, actor, decision, base)
        if slot is not None and new_id is not None and decision.head_id != NEW:
            self.overlay.rows[new_id].valid_to = slot[1]  # it ends where the next one began

    def _refuse(self, key: str, cell: Cell | None, item: OpInput, actor: str,
                base: dict[str, Any], reason: str) -> None:
        """An operation invalid in the cell's state, logged as a noop with its reason."""
        self.ops.append(PendingOp(key, cell, item, actor, str(OpType.NOOP), item.op, reason,
                                  {**base, "invalid": reason}, self.evidence, invalid=reason,
                                  method=str(item.method), after=self._after(cell, None)))

    # --- SPEC §8: source trust and valid time (observations only) -------------------------------

    def _place(self, cell: Cell, item: OpInput) -> tuple[OpInput, Slot | None]:
        """A fact that would replace the head goes into the history when it reports an older
        valid time than the head's, and contests the head when its source is trusted less
        than the head's support (who asked decides; ``hard_commit`` changes neither)."""
        head = self.overlay.head(cell)
        if not policy.replaces_head(item.op, item.value, head is not None):
            return item, None
        assert head is not None and self.evidence is not None
        observed = self.evidence.observed_at
        if observed is not None and policy.is_late(observed, head.valid_from):
            return item, self.overlay.valid_time_slot(cell, observed)
        levels = self._trust_levels()
        head_level = policy.head_trust(levels, self._head_sources(head) if levels else ())
        if policy.outranked(levels.get(self.evidence.source, 0), head_level):
            return replace(item, op=OpType.CONTEST, reason=policy.OUTRANKED_REASON), None
        return item, None

    def _trust_levels(self) -> dict[str, int]:
        if self._levels is None:
            self._levels = store.trust_levels(self.namespace)
        return self._levels

    def _head_sources(self, head: VersionRow) -> list[str]:
        """The sources of the evidence supporting the head: stored edges, and the operations
        of this batch that created or supported it (written only at the end)."""
        sources = [] if head.new else store.support_sources(head.id)
        sources += [op.evidence.source for op in self.ops
                    if op.evidence is not None and head.id in op.support_refs]
        if head.new and self.evidence is not None and not sources:
            sources = [self.evidence.source]
        return sources

    # --- recording ------------------------------------------------------------------------------

    def _record(self, cell: Cell, item: OpInput, actor: str, decision: Decision,
                base: dict[str, Any]) -> int | None:
        index = len(self.ops)
        head_before = self.overlay.heads.get(cell.pk)
        was_contested = self._contested(cell)
        target = self.overlay.rows.get(item.version_id) if item.version_id else None
        if target is not None:  # what the named version was: undo restores it only if still so
            base = {**base, "target_status": str(target.status)}
        valid_from = (self.evidence.observed_at if self.evidence is not None
                      and self.evidence.observed_at is not None else self.now)
        outcome = interpret(decision, self.overlay.sink(cell, created_by=index,
                                                        valid_from=valid_from, now=self.now))
        if decision.applied:
            self.overlay.changed.add(cell.pk)
        if was_contested and not self._contested(cell):
            # A contest closed: the review queue lists those a resolve did not close
            # (a person's work to review), through the partial index op_closed_contest_idx.
            base = {**base, "closed_contest": True}
        op = PendingOp(cell.key, cell, item, actor,
                       decision.op if decision.applied else str(OpType.NOOP), item.op,
                       item.reason or decision.note, base, self.evidence,
                       version_ref=outcome.version_ref, decision=decision,
                       reinstated=tuple(v for v, _ in outcome.reinstated),
                       support_refs=outcome.supported, tomb_refs=outcome.tombstoned,
                       head_before=head_before, head_after=outcome.head_after,
                       new_id=outcome.new_id, method=str(item.method),
                       after=self._after(cell, outcome.version_ref))
        self.ops.append(op)
        self.ops += [reinstate_op(op, index, version_id, status)
                     for version_id, status in outcome.reinstated]
        return outcome.new_id

    def _after(self, cell: Cell | None, version_ref: int | None) -> tuple[str, str, int | None]:
        """The cell as decided so far (for the operation's change event): the status of the
        version it names, the cell's status, its head."""
        row = self.overlay.rows.get(version_ref) if version_ref is not None else None
        head = self.overlay.head(cell) if cell is not None else None
        return (str(row.status) if row is not None else "",
                str(cell_status(str(head.status) if head is not None else None)),
                head.id if head is not None else None)

    def _contested(self, cell: Cell) -> bool:
        head = self.overlay.head(cell)
        return head is not None and head.status == Status.CONTESTED

    def write(self) -> list[Applied]:
        """Write everything decided; one :class:`Applied` per operation asked for (reinstate
        rows are the rollback's, not asked for)."""
        written = write(self.namespace, self.overlay, self.ops, self.now, self.vectors)
        return [
            Applied(operation, op.cell, op.decision, invalid=op.invalid,
                    reinstated=tuple(written.ids(v) or 0 for v in op.reinstated),
                    embedded=op.cell is not None and op.cell.pk not in written.unembedded,
                    evidence_id=op.evidence.pk if op.evidence is not None else None)
            for op, operation in zip(self.ops, written.operations, strict=True)
            if op.cause is None
        ]
