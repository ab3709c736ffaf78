"""Applying typed operations to the graph in PostgreSQL (SPEC §3, §4).

Every write to a cell happens here, inside a transaction that holds the row locks of the cells
it touches: lock the cells, read their open versions, ask the pure state machine
(:func:`memory.domain.decide`) for each operation's effects, then write all effects, move the
head pointers and write the operation rows. The partial unique index ``one_head_per_key`` backs
the invariant, so a bug raises IntegrityError instead of leaving a key with two current values.

Operations are applied as a *batch* (all facts of one observation, or one human operation):
decisions are taken one after another on an in-memory overlay of the locked cells, so a later
fact sees an earlier one's effect, and the writes are then issued a table at a time. The number
of SQL statements per observation is constant, whatever its number of facts.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
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
    decide_late,
    normalize_key,
)
from memory.domain.model import OPEN_STATUSES, RETRACTED_STATUSES
from memory.models import (
    EMBED_DIM,
    Cell,
    Evidence,
    KeyAlias,
    Namespace,
    Operation,
    SourceTrust,
    SupportEdge,
    Version,
)

from .binding import Float4Array, bound_cursor

log = logging.getLogger("pmem.graph")

#: Cell columns a commit never reads (the embeddings are refreshed after it, elsewhere).
_UNUSED_CELL_FIELDS = ("embedding", "key_embedding", "embedded_text")

#: What a commit reads of a cell, in model field order (for ``Cell.from_db``).
_CELL_COLUMNS = tuple(f.attname for f in Cell._meta.concrete_fields
                      if f.attname not in _UNUSED_CELL_FIELDS)
_LOCK_CELLS_SQL = (f"SELECT {', '.join(_CELL_COLUMNS)} FROM memory_cell"
                   " WHERE namespace_id = %s AND key = ANY(%s) ORDER BY key FOR UPDATE")
_CREATE_CELLS_SQL = (
    "INSERT INTO memory_cell (namespace_id, key, created_at, updated_at, embedded_text,"
    " vector_stale) SELECT %b, k, %b, %b, '', false FROM unnest(%b::varchar[]) AS k"
    " ON CONFLICT (namespace_id, key) DO NOTHING")

#: Operations that may create a cell for a key never seen before.
CREATING_OPS = frozenset({OpType.ACCEPT, OpType.REJECT})


class CellNotFound(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(f"no cell with key {key!r}")
        self.key = key


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

    @property
    def creates(self) -> bool:
        return self.op in CREATING_OPS and bool(self.value and self.value.strip())


@dataclass(frozen=True)
class Applied:
    """The outcome of one operation: its log row, the cell after it, and what changed."""

    operation: Operation
    cell: Cell | None
    decision: Decision | None
    invalid: str | None = None
    reinstated: tuple[int, ...] = field(default=())
    #: The commit wrote the cell's ``key: value`` embedding itself (nothing to refresh after).
    embedded: bool = False

    @property
    def head_changed(self) -> bool:
        return self.decision is not None and self.decision.applied


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
        applied = apply_batch(namespace=namespace, items=[(item, actor)], evidence=evidence,
                              explicit=explicit)[0]
    # The cell's `key: value` embedding follows its head, computed after the commit (never
    # inside a transaction: immediately here, or when an enclosing transaction commits).
    transaction.on_commit(lambda: _refresh_embedding(namespace, applied))
    return applied


def _refresh_embedding(namespace: Namespace, applied: Applied) -> None:
    from memory.llm.pipeline import after_commit

    try:
        after_commit(namespace=namespace, applied=[applied])
    except Exception:  # the operation stands; a stale embedding refreshes on the next commit
        log.exception("embedding refresh after operation %s failed", applied.operation.pk)


def apply_in_transaction(*, namespace: Namespace, item: OpInput, actor: str,
                         evidence: Evidence | None = None, explicit: bool = False) -> Applied:
    """Apply one ``item`` inside the caller's transaction."""
    return apply_batch(namespace=namespace, items=[(item, actor)], evidence=evidence,
                       explicit=explicit)[0]


def apply_batch(*, namespace: Namespace, items: Sequence[tuple[OpInput, str]],
                evidence: Evidence | None = None, explicit: bool = False,
                vectors: dict[str, Sequence[float]] | None = None) -> list[Applied]:
    """Apply ``items`` in order inside the caller's transaction (which must be open).

    Locks every cell the items name (in key order, so concurrent batches cannot deadlock),
    decides each item on the overlay, then writes. With ``explicit``, the first invalid item
    raises and the caller's transaction must be rolled back (nothing of the batch is kept).
    ``vectors`` (text -> vector, computed before the transaction) let the head move
    carry the cell's new embedding; cells it does not cover are refreshed after commit."""
    assert connection.in_atomic_block, "apply_batch needs an open transaction"
    if not items:
        return []
    batch = _Batch(namespace, evidence, timezone.now(), vectors or {})
    keys = [normalize_key(item.key) for item, _ in items]
    batch.lock_cells(keys, creating={k for k, (item, _) in zip(keys, items, strict=True)
                                     if item.creates})
    batch.load_versions([item.version_id for item, _ in items if item.version_id is not None])
    for key, (item, actor) in zip(keys, items, strict=True):
        batch.decide(key, item, actor, explicit=explicit)
    return batch.write()


def open_group(*, namespace: Namespace, keys: Sequence[str], creating: set[str],
               vectors: dict[str, Sequence[float]]) -> _Batch:
    """A batch for several observations committed in one transaction (group commit): the
    cells of every key they name are locked up front, in key order like every batch's (a
    deadlock with another writer is still possible through aliases and freshly created cells,
    and the caller re-runs the transaction), and cells are created for every key a fact could
    create; each
    observation is then planned on the overlay (:meth:`_Batch.head_views`) and applied with
    :meth:`_Batch.apply_observation`, and :meth:`_Batch.write` writes everything with one
    statement per table. Cells created but left unused are deleted again at the write."""
    assert connection.in_atomic_block, "open_group needs an open transaction"
    batch = _Batch(namespace, None, timezone.now(), vectors)
    normalized = sorted({normalize_key(k) for k in keys if normalize_key(k)})
    batch.lock_cells(normalized, creating={normalize_key(k) for k in creating})
    batch.load_versions([])
    return batch


# --- the overlay ------------------------------------------------------------------------------


@dataclass
class _Row:
    """A version as the batch sees it; ``id`` is negative until the row is inserted."""

    id: int
    cell_id: int
    value: str
    status: Status
    supersedes_id: int | None
    alternative_of_id: int | None
    valid_from: datetime
    valid_to: datetime | None
    support: int
    new: bool = False
    created_by: int | None = None  # op index in the batch
    support_delta: int = 0
    dirty: bool = False

    def view(self) -> VersionView:
        return VersionView(self.id, self.value, self.status, self.supersedes_id)


@dataclass
class _PendingOp:
    key: str
    cell: Cell | None
    item: OpInput
    actor: str
    type: str
    requested: str
    reason: str
    payload: dict[str, Any]
    version_ref: int | None = None  # a version id (negative: created in this batch)
    cause: int | None = None  # for reinstate rows: index of the causing op
    decision: Decision | None = None
    invalid: str | None = None
    reinstated: tuple[int, ...] = ()
    support_refs: list[int] = field(default_factory=list)
    tomb_refs: list[int] = field(default_factory=list)
    evidence: Evidence | None = None  # the observation it came from (a group has several)
    head_before: int | None = None
    head_after: int | None = None
    new_id: int | None = None  # the version it created (a temporary id until written)


class _Batch:
    def __init__(self, namespace: Namespace, evidence: Evidence | None, now: datetime,
                 vectors: dict[str, Sequence[float]]) -> None:
        self.namespace, self.evidence, self.now, self.vectors = namespace, evidence, now, vectors
        self.cells: dict[str, Cell] = {}
        self.rows: dict[int, _Row] = {}
        self.by_cell: dict[int, list[_Row]] = {}  # the same rows, by cell
        self.heads: dict[int, int | None] = {}  # cell id -> head row id
        self.ops: list[_PendingOp] = []
        self.created: set[int] = set()  # cells inserted by this batch
        self.changed: set[int] = set()  # cells whose head or head status this batch changed
        self.unembedded: set[int] = set()  # changed cells whose new embedding is not known
        self._temp = -1
        self._trust_levels: dict[str, int] | None = None

    # --- reading, under lock ----------------------------------------------------------------

    def lock_cells(self, keys: list[str], creating: set[str]) -> None:
        wanted = sorted(set(keys))
        self._select_for_update(wanted)
        missing = [k for k in wanted if k not in self.cells]
        if missing:
            for alias, cell_id in KeyAlias.objects.filter(
                    namespace=self.namespace, alias__in=missing).values_list("alias", "cell_id"):
                cell = (Cell.objects.select_for_update().defer(*_UNUSED_CELL_FIELDS)
                        .get(pk=cell_id))
                self.cells[alias] = cell
        to_create = sorted(k for k in creating if k not in self.cells)
        if to_create:
            # Two writers may create one key at once: insert-or-ignore, then lock what won.
            with bound_cursor() as cur:
                cur.execute(_CREATE_CELLS_SQL, [self.namespace.pk, self.now, self.now, to_create])
            self._select_for_update(to_create)
            # A cell with no head yet was created here (or by a racing writer a moment ago):
            # either way its key embedding is still to be written.
            self.created = {self.cells[k].pk for k in to_create
                            if k in self.cells and self.cells[k].head_id is None}
        for cell in self.cells.values():
            self.heads[cell.pk] = cell.head_id

    def _select_for_update(self, keys: list[str]) -> None:
        # Raw SQL, rows turned into model instances the way the ORM does (``from_db``): the
        # queryset's compilation was a tenth of a commit (issue 7). The vectors are not needed
        # to decide, and decoding two 384-d vectors per locked cell was another: left out.
        with connection.cursor() as cur:
            cur.execute(_LOCK_CELLS_SQL, [self.namespace.pk, keys])
            for row in cur.fetchall():
                cell = Cell.from_db(connection.alias, _CELL_COLUMNS, row)
                self.cells[cell.key] = cell

    def load_versions(self, named_ids: list[int]) -> None:
        """Open versions of every locked cell, plus versions named by id, in one query."""
        cell_ids = list({c.pk for c in self.cells.values()})
        if not cell_ids:
            return
        sql = ("SELECT id, cell_id, value, status, supersedes_id, alternative_of_id, valid_from,"
               " valid_to, support FROM memory_version WHERE cell_id = ANY(%s) AND"
               " (status = ANY(%s) OR id = ANY(%s))")
        with connection.cursor() as cur:
            cur.execute(sql, [cell_ids, [s.value for s in OPEN_STATUSES], named_ids])
            for r in cur.fetchall():
                self._add(r)

    def _add(self, r: Sequence[Any]) -> None:
        if r[0] not in self.rows:
            self._keep(_Row(r[0], r[1], r[2], Status(r[3]), r[4], r[5], r[6], r[7], r[8]))

    def _keep(self, row: _Row) -> None:
        self.rows[row.id] = row
        self.by_cell.setdefault(row.cell_id, []).append(row)

    def _predecessors(self, head: _Row) -> tuple[VersionView, ...]:
        """Walk ``supersedes`` back to the first version rollback may reinstate, from the
        overlay where it can and the database (one recursive query) where it must."""
        out: list[VersionView] = []
        cursor = head.supersedes_id
        while cursor is not None:
            if cursor not in self.rows:
                for r in _predecessor_rows(cursor):
                    self._add(r)
            row = self.rows[cursor]
            out.append(row.view())
            if row.status not in RETRACTED_STATUSES:
                break
            cursor = row.supersedes_id
        return tuple(out)

    def _state(self, cell: Cell, item: OpInput) -> CellState:
        head_id = self.heads.get(cell.pk)
        head = self.rows[head_id] if head_id is not None else None
        alternatives = tuple(sorted(
            (r.view() for r in self.by_cell.get(cell.pk, ()) if r.status == Status.ALTERNATIVE),
            key=lambda v: (v.id < 0, abs(v.id)),  # stored rows first, then this batch's
        ))
        target = None
        if item.version_id is not None:
            row = self.rows.get(item.version_id)
            target = row.view() if row is not None and row.cell_id == cell.pk else None
        retracts = head is not None and (
            (item.op == OpType.REVOKE and item.version_id in (None, head.id))
            or (item.op == OpType.REJECT and not (item.value and item.value.strip())))
        preds = self._predecessors(head) if retracts and head is not None else ()
        return CellState(head.view() if head else None, alternatives, preds, target)

    # --- planning on the overlay (group commit) ------------------------------------------------

    def apply_observation(self, evidence: Evidence, items: Sequence[tuple[OpInput, str]]) -> None:
        """Decide one observation's planned items on the overlay (written by :meth:`write`).
        Its versions' valid time starts now, as if it had been committed on its own (the
        group's rows share one transaction time, ``created_at``)."""
        self.evidence = evidence
        self.now = timezone.now()
        self.load_named([item.version_id for item, _ in items if item.version_id is not None])
        for item, actor in items:
            self.decide(normalize_key(item.key), item, actor, explicit=False)

    def load_named(self, ids: Sequence[int]) -> None:
        """Versions named by id that the overlay does not hold yet (one query, if any)."""
        wanted = sorted({i for i in ids if i is not None and i > 0 and i not in self.rows})
        if not wanted:
            return
        with connection.cursor() as cur:
            cur.execute("SELECT id, cell_id, value, status, supersedes_id, alternative_of_id,"
                        " valid_from, valid_to, support FROM memory_version WHERE id = ANY(%s)",
                        [wanted])
            for r in cur.fetchall():
                self._add(r)

    def _live_cell(self, key: str) -> Cell | None:
        cell = self.cells.get(key)
        if cell is not None and cell.pk in self.created and cell.pk not in self.changed:
            return None  # created up front for a later fact: not in memory yet
        return cell

    def head_views(self, keys: Sequence[str]) -> dict[str, Any]:
        """What annotation reads of each key's cell (head value, status, alternatives), as
        this batch has left it: the overlay of everything decided so far."""
        from memory.llm.pipeline import HeadView

        out = {}
        for key in keys:
            cell = self._live_cell(key)
            if cell is None:
                continue
            head_id = self.heads.get(cell.pk)
            head = self.rows[head_id] if head_id is not None else None
            alternatives = () if head is None or head.status != Status.CONTESTED else tuple(
                r.value for r in sorted(self.by_cell.get(cell.pk, ()),
                                        key=lambda r: (r.id < 0, abs(r.id)))
                if r.status == Status.ALTERNATIVE)
            out[key] = HeadView(cell.key, head.value if head else None,
                                str(head.status) if head else None, alternatives)
        return out

    def withdrawn_target(self, key: str, value: str | None) -> int | None:
        """The version a 'reported in error' fact names: the newest non-revoked one of the
        key's cell holding ``value`` — this batch's own versions first (they are newer), then
        the stored ones, each with the status the overlay gives it."""
        from memory.domain.model import same_value

        if not value:
            return None
        cell = self.cells.get(key)
        if cell is None or cell.key != key:
            return None  # the stored lookup goes by the cell's own key, not an alias
        mine = sorted((r for r in self.by_cell.get(cell.pk, ()) if r.new), key=lambda r: r.id)
        for row in mine:  # most negative first: the newest
            if row.status != Status.REVOKED and same_value(row.value, value):
                return row.id
        with connection.cursor() as cur:
            cur.execute("SELECT id, value, status FROM memory_version WHERE cell_id = %s"
                        " ORDER BY id DESC", [cell.pk])
            for vid, v_value, status in cur.fetchall():
                status = self.rows[vid].status if vid in self.rows else status
                if status != Status.REVOKED and same_value(v_value, value):
                    return vid
        return None

    # --- deciding ---------------------------------------------------------------------------

    def decide(self, key: str, item: OpInput, actor: str, *, explicit: bool) -> None:
        first = len(self.ops)
        try:
            self._decide(key, item, actor, explicit=explicit)
        finally:
            for op in self.ops[first:]:
                op.evidence = self.evidence

    def _decide(self, key: str, item: OpInput, actor: str, *, explicit: bool) -> None:
        # A cell created up front for a later fact of the group is not in memory yet.
        cell = self.cells.get(key) if item.creates else self._live_cell(key)
        base = {**item.payload, "requested": str(item.op), "value": item.value,
                "version": item.version_id}
        if cell is None:
            if explicit:
                raise CellNotFound(key)
            reason = f"invalid: {item.op} needs a head (no cell {key!r})"
            self.ops.append(_PendingOp(key, None, item, actor, "noop", item.op, reason,
                                       {**base, "invalid": reason}, invalid=reason))
            return
        late_after: tuple[int | None, datetime | None] | None = None
        if not explicit and self.evidence is not None:
            item, late_after = self._source_policy(cell, item)
        try:
            state = self._state(cell, item)
            if late_after is not None:
                decision = decide_late(state, item.value or "", late_after[0])
            else:
                decision = decide(state, OpRequest(item.op, item.value, item.version_id))
        except InvalidOperation as exc:
            if explicit:
                raise
            self.ops.append(_PendingOp(cell.key, cell, item, actor, "noop", item.op, exc.reason,
                                       {**base, "invalid": exc.reason}, invalid=exc.reason))
            return
        new_id = self._apply(cell, item, actor, decision, base)
        if late_after is not None and new_id is not None and decision.head_id != NEW:
            self.rows[new_id].valid_to = late_after[1]  # it ends where the next one began

    # --- SPEC §8: source trust and valid time (observations only) -------------------------------

    def _source_policy(self, cell: Cell, item: OpInput
                       ) -> tuple[OpInput, tuple[int | None, datetime | None] | None]:
        """A fact that would replace the head is placed by its valid time (a report older than
        the head goes into the history, SPEC §8) and by its source's trust (a less trusted
        source than the head's support contests instead of superseding). ``hard_commit``
        facts, structured corrections, are applied as sent."""
        head_id = self.heads.get(cell.pk)
        replaces = item.op in CREATING_OPS and item.creates and head_id is not None
        if not replaces or item.payload.get("hard_commit"):
            return item, None
        head = self.rows[head_id]
        observed = self.evidence.observed_at if self.evidence else None
        if observed is not None and observed < head.valid_from:
            return item, self._valid_time_slot(cell, observed)
        if self._trust(self.evidence.source if self.evidence else "") < self._head_trust(head):
            return replace(item, op=OpType.CONTEST,
                           reason="source trusted less than the head's support: contest"), None
        return item, None

    def _valid_time_slot(self, cell: Cell, observed: datetime) -> tuple[int | None, datetime | None]:
        """(the version valid just before ``observed``, when the next one became valid)."""
        known = {(r.valid_from, r.id) for r in self.by_cell.get(cell.pk, ())}
        known |= set(Version.objects.filter(cell=cell).values_list("valid_from", "id"))
        ordered = sorted(known, key=lambda pair: (pair[0], abs(pair[1])))
        before = [vid for vf, vid in ordered if vf <= observed]
        after = [vf for vf, vid in ordered if vf > observed]
        return (before[-1] if before else None), (after[0] if after else None)

    def _trust(self, source: str) -> int:
        if self._trust_levels is None:
            self._trust_levels = dict(SourceTrust.objects.filter(namespace=self.namespace)
                                      .values_list("source", "level"))
        return self._trust_levels.get(source, 0)

    def _head_trust(self, head: _Row) -> int:
        self._trust("")  # loads the namespace's levels once
        if not self._trust_levels:
            return 0  # no trust levels configured: every source is equal
        sources = [] if head.new else list(
            SupportEdge.objects.filter(version_id=head.id, evidence__isnull=False)
            .values_list("evidence__source", flat=True).distinct())
        # ... and the evidence of this batch's operations that created or supported it (a
        # group commit writes its edges at the end).
        sources += [op.evidence.source for op in self.ops
                    if op.evidence is not None and head.id in op.support_refs]
        if head.new and self.evidence is not None and not sources:
            sources = [self.evidence.source]
        return max((self._trust(src) for src in sources), default=0)

    def _apply(self, cell: Cell, item: OpInput, actor: str, decision: Decision,
               base: dict[str, Any]) -> int | None:
        index = len(self.ops)
        head_before = self.heads.get(cell.pk)
        op = _PendingOp(cell.key, cell, item, actor,
                        decision.op if decision.applied else "noop", item.op,
                        item.reason or decision.note, base, decision=decision)
        self.ops.append(op)
        new_id: int | None = None
        reinstated: list[tuple[int, Status]] = []
        for e in decision.effects:
            if isinstance(e, NewVersion):
                new_id = self._temp = self._temp - 1
                self._keep(_Row(
                    new_id, cell.pk, e.value, e.status, e.supersedes_id, e.alternative_of_id,
                    self._valid_from(), None, 1, new=True, created_by=index))
                op.support_refs.append(new_id)
            elif isinstance(e, Retype | Reinstate):
                self._retype(self.rows[e.version_id], e.status)
                if isinstance(e, Reinstate):
                    reinstated.append((e.version_id, e.status))
            elif isinstance(e, LinkSupersedes):
                row = self.rows[e.version_id]
                row.supersedes_id, row.dirty = e.supersedes_id, True
            elif isinstance(e, Support):
                row = self.rows[e.version_id]
                row.support += 1
                row.support_delta += 1
                row.dirty = True
                op.support_refs.append(e.version_id)
            elif isinstance(e, Tombstone):
                op.tomb_refs.append(e.version_id)
        head_after = new_id if decision.head_id == NEW else decision.head_id
        self.heads[cell.pk] = head_after
        if decision.applied:
            self.changed.add(cell.pk)
        op.version_ref = new_id or _first_touched(decision) or head_after
        op.reinstated = tuple(v for v, _ in reinstated)
        op.head_before, op.head_after, op.new_id = head_before, head_after, new_id
        for version_id, status in reinstated:
            self.ops.append(_PendingOp(
                cell.key, cell, item, actor, Operation.Type.REINSTATE, item.op,
                "rollback", {"status": str(status)}, version_ref=version_id, cause=index))
        return new_id

    def _valid_from(self) -> datetime:
        if self.evidence is not None and self.evidence.observed_at is not None:
            return self.evidence.observed_at
        return self.now

    def _retype(self, row: _Row, status: Status) -> None:
        row.status, row.dirty = status, True
        if status in OPEN_STATUSES:
            row.valid_to = None
        elif row.valid_to is None:
            row.valid_to = self.now

    # --- writing ----------------------------------------------------------------------------

    def write(self) -> list[Applied]:
        new_rows = [r for r in self.rows.values() if r.new]
        version_ids, op_ids = _allocate_ids(len(new_rows), len(self.ops))
        real = {r.id: vid for r, vid in zip(sorted(new_rows, key=lambda r: -r.id), version_ids,
                                            strict=True)}

        def m(ref: int | None) -> int | None:
            return real.get(ref, ref) if ref is not None else None

        ns_id = self.namespace.pk
        rows = []
        for op, op_id in zip(self.ops, op_ids, strict=True):
            ev_id, seq = (op.evidence.pk, op.evidence.seq) if op.evidence else (None, None)
            first = op.cause is None  # else a reinstate row, caused by the op it names
            payload = _payload(op, m, None if first else op_ids[op.cause])
            rows.append((
                op_id, ns_id, op.cell.pk if op.cell is not None else None, op.key, op.type,
                str(op.requested), op.actor, ev_id, seq, m(op.version_ref),
                op.item.value if first else None, payload,
                op.reason if first else f"rollback after operation {op_ids[op.cause]}",
                op.item.raw_output if first else "", op.item.prompt_tokens if first else 0,
                op.item.completion_tokens if first else 0, self.now))
        # Rows go in with one INSERT ... SELECT FROM unnest(...) per table: Django's
        # bulk_create built and quoted every field of every row (a fifth of a commit, issue 7).
        _insert("memory_operation", _OPERATION_COLUMNS, [
            (*row[:11], json.dumps(row[11], cls=DjangoJSONEncoder), *row[12:]) for row in rows])
        operations = [_stored_operation(row, self.namespace, op.cell, op.evidence)
                      for row, op in zip(rows, self.ops, strict=True)]
        stored = [r for r in self.rows.values() if not r.new and r.dirty]
        # Order matters for the partial unique index: demote first, insert, then promote.
        _update_rows([r for r in stored if r.status not in HEAD_STATUSES], m)
        _insert("memory_version", _VERSION_COLUMNS, [
            (m(r.id), ns_id, r.cell_id, r.value, str(r.status), r.valid_from, r.valid_to,
             r.support, op_ids[r.created_by or 0], m(r.supersedes_id), m(r.alternative_of_id),
             self.now)
            for r in sorted(new_rows, key=lambda r: -r.id)])
        _update_rows([r for r in stored if r.status in HEAD_STATUSES], m)
        _insert("memory_supportedge", _SUPPORT_COLUMNS, [
            (m(ref), op.evidence.pk if op.evidence else None, op_id)
            for op, op_id in zip(self.ops, op_ids, strict=True) for ref in op.support_refs])
        _insert("memory_tombstone", _TOMBSTONE_COLUMNS, [
            (m(ref), op_id, self.now)
            for op, op_id in zip(self.ops, op_ids, strict=True) for ref in op.tomb_refs])
        self._move_heads(m)
        self._drop_unused_cells()
        return [
            Applied(operation, op.cell, op.decision, invalid=op.invalid,
                    reinstated=tuple(m(v) or 0 for v in op.reinstated),
                    embedded=op.cell is not None and op.cell.pk not in self.unembedded)
            for op, operation in zip(self.ops, operations, strict=True) if op.cause is None
        ]

    def _drop_unused_cells(self) -> None:
        """Cells this batch created for a fact that then did not use them (a group creates the
        cells of all its keys up front; a withdrawn value of an unknown key uses none) are
        deleted again, so no empty cell is left behind. Guarded: a cell anything refers to
        (a racing writer's) stays."""
        unused = sorted(self.created - self.changed)
        if not unused:
            return
        with connection.cursor() as cur:
            cur.execute(
                "DELETE FROM memory_cell AS c WHERE c.id = ANY(%s) AND c.head_id IS NULL"
                " AND NOT EXISTS (SELECT 1 FROM memory_operation o WHERE o.cell_id = c.id)"
                " AND NOT EXISTS (SELECT 1 FROM memory_version v WHERE v.cell_id = c.id)"
                " AND NOT EXISTS (SELECT 1 FROM memory_keyalias a WHERE a.cell_id = c.id)",
                [unused])
        for key in [k for k, c in self.cells.items() if c.pk in unused]:
            del self.cells[key]

    def _move_heads(self, m: Any) -> None:
        """One UPDATE for every cell the batch changed (or created): the head pointer and,
        when ``vectors`` hold the new ``key: value`` (they usually do), its embedding too, so
        the row is rewritten once. A supported head (noop) leaves its cell row alone. A
        created cell also gets its key embedding. Cells whose vectors are missing are marked
        for the refresh after commit. The vectors travel as one binary ``float4[]`` each."""
        from memory.domain.render import embedding_text
        from memory.llm.pipeline import key_text

        touched = [c for c in {c.pk: c for c in self.cells.values()}.values()
                   if c.pk in self.changed]
        if not touched:
            return
        ids, heads, set_emb, texts, emb_at, kemb_at = [], [], [], [], [], []
        embs: list[Any] = []
        kembs: list[Any] = []
        for cell in touched:
            head = self.heads.get(cell.pk)
            cell.head_id, cell.updated_at = m(head), self.now
            text = embedding_text(cell.key, self.rows[head].value) if head is not None else ""
            vector = self.vectors.get(text) if text else None
            known = text == "" or vector is not None
            kvector = self.vectors.get(key_text(cell.key)) if cell.pk in self.created else None
            if not known or (cell.pk in self.created and kvector is None):
                self.unembedded.add(cell.pk)
            ids.append(cell.pk)
            heads.append(cell.head_id)
            set_emb.append(known)
            texts.append(text)
            emb_at.append(_slot(embs, vector))
            kemb_at.append(_slot(kembs, kvector))
        # The moved cells leave the frontier index (their copies are deleted, a heap delete,
        # no index insert) and are scanned exactly by reads until frontier_flush re-indexes
        # them: a head move rewrites only btree-indexed rows.
        with bound_cursor() as cur:
            cur.execute(_MOVE_HEADS_SQL, {
                "now": self.now, "ids": ids, "heads": heads, "set_emb": set_emb,
                "texts": texts, "emb_at": emb_at, "kemb_at": kemb_at, "dim": EMBED_DIM,
                "embs": Float4Array(embs, EMBED_DIM), "kembs": Float4Array(kembs, EMBED_DIM)})


def _slot(vectors: list[Any], vector: Any) -> int | None:
    """Append ``vector`` (if any) to a flat batch; its index there."""
    if vector is None:
        return None
    vectors.append(vector)
    return len(vectors) - 1


_MOVE_HEADS_SQL = """
WITH v AS (
    SELECT id, head, set_emb, text,
           (%(embs)b::float4[])[emb_at * %(dim)b + 1 : (emb_at + 1) * %(dim)b]::vector AS emb,
           (%(kembs)b::float4[])[kemb_at * %(dim)b + 1 : (kemb_at + 1) * %(dim)b]::vector AS kemb
      FROM unnest(%(ids)b::bigint[], %(heads)b::bigint[], %(set_emb)b::bool[], %(texts)b::text[],
                  %(emb_at)b::int[], %(kemb_at)b::int[])
           AS u(id, head, set_emb, text, emb_at, kemb_at)
), moved AS (
    UPDATE memory_cell AS c SET head_id = v.head, updated_at = %(now)b,
           embedded_text = CASE WHEN v.set_emb THEN v.text ELSE c.embedded_text END,
           embedding = CASE WHEN v.set_emb THEN v.emb ELSE c.embedding END,
           key_embedding = COALESCE(c.key_embedding, v.kemb),
           vector_stale = true
      FROM v WHERE c.id = v.id
    RETURNING c.id
)
DELETE FROM memory_frontiervector AS f USING moved WHERE f.cell_id = moved.id
"""


_OPERATION_COLUMNS = (
    ("id", "bigint"), ("namespace_id", "bigint"), ("cell_id", "bigint"), ("key", "varchar"),
    ("type", "varchar"), ("requested", "varchar"), ("actor", "varchar"),
    ("evidence_id", "bigint"), ("seq", "bigint"), ("version_id", "bigint"), ("value", "text"),
    ("payload", "jsonb"), ("reason", "text"), ("raw_output", "text"), ("prompt_tokens", "int"),
    ("completion_tokens", "int"), ("created_at", "timestamptz"))
_OPERATION_NAMES = tuple(name for name, _ in _OPERATION_COLUMNS)
assert [name for name, _ in _OPERATION_COLUMNS] == [
    f.attname for f in Operation._meta.concrete_fields], "keep _OPERATION_COLUMNS in field order"


def _stored_operation(row: tuple[Any, ...], namespace: Namespace, cell: Cell | None,
                      evidence: Evidence | None) -> Operation:
    """The model instance of a row just inserted, built the way the ORM loads one (positional,
    no keyword parsing), with its namespace, cell and evidence attached (no query later)."""
    operation = Operation.from_db(connection.alias, _OPERATION_NAMES, row)
    cache = operation._state.fields_cache
    cache["namespace"] = namespace
    if cell is not None:
        cache["cell"] = cell
    if evidence is not None:
        cache["evidence"] = evidence
    return operation


_VERSION_COLUMNS = (
    ("id", "bigint"), ("namespace_id", "bigint"), ("cell_id", "bigint"), ("value", "text"),
    ("status", "varchar"), ("valid_from", "timestamptz"), ("valid_to", "timestamptz"),
    ("support", "int"), ("created_by_id", "bigint"), ("supersedes_id", "bigint"),
    ("alternative_of_id", "bigint"), ("created_at", "timestamptz"))
_SUPPORT_COLUMNS = (("version_id", "bigint"), ("evidence_id", "bigint"),
                    ("operation_id", "bigint"))
_TOMBSTONE_COLUMNS = (("version_id", "bigint"), ("operation_id", "bigint"),
                      ("created_at", "timestamptz"))


def _insert(table: str, columns: Sequence[tuple[str, str]], rows: list[tuple[Any, ...]]) -> None:
    """Insert ``rows`` with ONE statement: each column travels as one typed array."""
    if not rows:
        return
    names = ", ".join(name for name, _ in columns)
    arrays = ", ".join(f"%b::{kind}[]" for _, kind in columns)
    with bound_cursor() as cur:
        cur.execute(f"INSERT INTO {table} ({names}) SELECT * FROM unnest({arrays})",
                    [list(col) for col in zip(*rows, strict=True)])


def _update_rows(rows: list[_Row], m: Any) -> None:
    """One UPDATE for many versions: status, interval, support and supersedes edge."""
    if not rows:
        return
    with bound_cursor() as cur:
        cur.execute(
            "UPDATE memory_version AS t SET status = v.status, valid_to = v.valid_to,"
            " support = t.support + v.delta, supersedes_id = v.sup"
            " FROM unnest(%b::bigint[], %b::varchar[], %b::timestamptz[], %b::int[],"
            " %b::bigint[]) AS v(id, status, valid_to, delta, sup) WHERE t.id = v.id",
            [[r.id for r in rows], [str(r.status) for r in rows], [r.valid_to for r in rows],
             [r.support_delta for r in rows], [m(r.supersedes_id) for r in rows]])


_PREDECESSORS_SQL = """
WITH RECURSIVE chain AS (
    SELECT id, cell_id, value, status, supersedes_id, alternative_of_id, valid_from, valid_to,
           support, 0 AS depth
      FROM memory_version WHERE id = %s
    UNION ALL
    SELECT v.id, v.cell_id, v.value, v.status, v.supersedes_id, v.alternative_of_id,
           v.valid_from, v.valid_to, v.support, c.depth + 1
      FROM memory_version v JOIN chain c ON v.id = c.supersedes_id
     WHERE c.status IN ('revoked', 'contradicted')
)
SELECT id, cell_id, value, status, supersedes_id, alternative_of_id, valid_from, valid_to, support
  FROM chain ORDER BY depth
"""


def _predecessor_rows(first_id: int) -> list[Sequence[Any]]:
    """The supersedes chain from ``first_id`` backward, stopping at the first version that
    rollback may reinstate — one query, no walk over the rest of the history."""
    with connection.cursor() as cur:
        cur.execute(_PREDECESSORS_SQL, [first_id])
        return list(cur.fetchall())


def predecessors_of(first_id: int) -> tuple[VersionView, ...]:
    return tuple(VersionView(r[0], r[2], Status(r[3]), r[4]) for r in _predecessor_rows(first_id))


def _allocate_ids(n_versions: int, n_operations: int) -> tuple[list[int], list[int]]:
    """Take ids from the sequences up front so rows can reference each other in one pass;
    ids come in increasing order, which keeps ``supersedes`` pointing strictly backward."""
    with bound_cursor() as cur:
        cur.execute(
            "SELECT array(SELECT nextval('memory_version_id_seq') FROM generate_series(1, %b)),"
            " array(SELECT nextval('memory_operation_id_seq') FROM generate_series(1, %b))",
            [n_versions, n_operations])
        versions, operations = cur.fetchone()
    return sorted(versions), sorted(operations)


def _first_touched(decision: Decision) -> int | None:
    """The existing version an operation acted on first (its log row points there)."""
    for e in decision.effects:
        if isinstance(e, Tombstone | Support | Retype | Reinstate):
            return e.version_id
    return None


def _payload(op: _PendingOp, m: Any, cause: int | None) -> dict[str, Any]:
    """An operation's log payload, with the stored ids of versions this batch created (the
    overlay's are temporary, negative): the version it named, the heads before and after,
    and its effects."""
    payload = dict(op.payload)
    if isinstance(payload.get("version"), int):
        payload["version"] = m(payload["version"])
    if op.decision is not None and op.cause is None:
        payload["head_before"] = m(op.head_before)
        payload["head_after"] = m(op.head_after)
        payload["effects"] = _effects_json(op.decision, op.new_id, m)
    if cause is not None:
        payload["cause"] = cause
    return payload


def _effects_json(decision: Decision, new_id: int | None, m: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for e in decision.effects:
        row: dict[str, Any] = {"effect": type(e).__name__}
        for name, val in vars(e).items():
            if name.endswith("id"):
                val = m(new_id if val == NEW else val)
            row[name] = str(val) if isinstance(val, Status) else val
        out.append(row)
    return out
