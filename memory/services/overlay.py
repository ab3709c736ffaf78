"""The overlay: the cells a commit works on, held in memory while it decides.

Planning and applying read the graph through this one interface — heads and alternatives
(:meth:`Overlay.head_views`), the version a withdrawal names (:meth:`Overlay.withdrawn_target`),
the state the state machine needs, rollback chain included (:meth:`Overlay.state`) — and
applying changes it through the shared effect interpreter (:meth:`Overlay.sink`). So a later
fact of a batch, or a later observation of a group, sees what the earlier ones did, and the
writer (:mod:`memory.services.writer`) finds every change here.

An overlay is loaded either under lock, inside the commit's transaction
(:func:`locked_overlay`), or as a plain snapshot for planning with a model outside any
transaction (:func:`snapshot_overlay`). Ids of versions created here are negative until written.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import connection

from memory.domain import (
    CellState,
    HeadView,
    NewVersion,
    OpInput,
    Status,
    VersionView,
    valid_to_after,
)
from memory.domain.policy import valid_time_slot, withdrawn_target
from memory.domain.rollback import retracts_head, rollback_chain
from memory.models import Cell, Namespace

from . import store
from .expiry import expire_due


@dataclass
class VersionRow:
    """A version as the overlay holds it."""

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
    created_by: int | None = None  # index of the creating operation in the batch
    support_delta: int = 0
    dirty: bool = False
    restores_id: int | None = None  # restore: the version it brings back (stored id)

    def view(self) -> VersionView:
        return VersionView(self.id, self.value, self.status, self.supersedes_id)


def _stored_first(row: VersionRow) -> tuple[bool, int]:
    return row.id < 0, abs(row.id)


class Overlay:
    def __init__(self) -> None:
        self.cells: dict[str, Cell] = {}  # by name: a cell's key, or an alias of it
        self.rows: dict[int, VersionRow] = {}
        self.by_cell: dict[int, list[VersionRow]] = {}  # the same rows, by cell
        self.heads: dict[int, int | None] = {}  # cell id -> head row id
        self.created: set[int] = set()  # cells inserted for this batch, not in memory yet
        self.changed: set[int] = set()  # cells whose head or head status was changed here
        self.asked: set[int] = set()  # version ids already looked up (found or not)
        self._temp = -1

    def add(self, record: store.VersionRecord) -> None:
        if record[0] not in self.rows:
            self._keep(VersionRow(record[0], record[1], record[2], Status(record[3]),
                                  record[4], record[5], record[6], record[7], record[8]))

    def _keep(self, row: VersionRow) -> None:
        self.rows[row.id] = row
        self.by_cell.setdefault(row.cell_id, []).append(row)

    def load_named(self, ids: Sequence[int | None]) -> None:
        """Versions named by id that the overlay does not hold yet (one query, if any)."""
        wanted = sorted({i for i in ids if i is not None and i > 0 and i not in self.rows
                         and i not in self.asked})
        self.asked.update(wanted)
        if wanted:
            for record in store.versions_by_id(wanted):
                self.add(record)

    # --- reading: planning and the state machine ---------------------------------------------

    def cell(self, key: str, *, creating: bool = False) -> Cell | None:
        """The cell ``key`` names. A cell created up front for a later fact of the group is
        not in memory yet: only an operation that may create it sees it."""
        cell = self.cells.get(key)
        if cell is not None and not creating and cell.pk in self.created \
                and cell.pk not in self.changed:
            return None
        return cell

    def head(self, cell: Cell) -> VersionRow | None:
        head_id = self.heads.get(cell.pk)
        return self.rows[head_id] if head_id is not None else None

    def alternatives(self, cell: Cell) -> list[VersionRow]:
        """The cell's alternatives: stored ones first, then this batch's, oldest first."""
        return sorted((r for r in self.by_cell.get(cell.pk, ()) if r.status == Status.ALTERNATIVE),
                      key=_stored_first)

    def head_views(self, keys: Sequence[str]) -> dict[str, HeadView]:
        """What annotation reads of each key's cell, as everything decided so far left it."""
        out = {}
        for key in keys:
            cell = self.cell(key)
            if cell is None:
                continue
            head = self.head(cell)
            alternatives = () if head is None or head.status != Status.CONTESTED else tuple(
                r.value for r in self.alternatives(cell))
            out[key] = HeadView(cell.key, head.value if head else None,
                                str(head.status) if head else None, alternatives)
        return out

    def withdrawn_target(self, key: str, value: str | None) -> int | None:
        """The version a 'reported in error' fact names (:func:`~memory.domain.policy.
        withdrawn_target`): this batch's versions first (they are newer), then the stored
        ones with the status the overlay gives them. A registered alias names its key's cell
        (SPEC §5.3), for a withdrawal as for any fact."""
        cell = self.cells.get(key)
        if not value or cell is None:
            return None
        mine = sorted((r for r in self.by_cell.get(cell.pk, ()) if r.new), key=lambda r: r.id)
        return withdrawn_target(itertools.chain(
            ((r.id, r.value, r.status) for r in mine), self._stored_versions(cell)), value)

    def _stored_versions(self, cell: Cell) -> Iterator[tuple[int, str, str]]:
        for vid, value, status in store.versions_newest_first(cell.pk):  # only when reached
            yield vid, value, self.rows[vid].status if vid in self.rows else status

    def state(self, cell: Cell, item: OpInput) -> CellState:
        head = self.head(cell)
        target = None
        if item.version_id is not None:
            row = self.rows.get(item.version_id)
            target = row.view() if row is not None and row.cell_id == cell.pk else None
        chain: tuple[VersionView, ...] = ()
        if head is not None and retracts_head(item.op, item.value, item.version_id, head.id):
            chain = rollback_chain(head.supersedes_id, self._version)
        return CellState(head.view() if head else None,
                         tuple(r.view() for r in self.alternatives(cell)), chain, target)

    def _version(self, version_id: int) -> VersionView:
        if version_id not in self.rows:  # the rest of the chain, in one query
            for record in store.rollback_chain_rows(version_id):
                self.add(record)
        return self.rows[version_id].view()

    def valid_time_slot(self, cell: Cell, observed: datetime
                        ) -> tuple[int | None, datetime | None]:
        known = [(r.valid_from, r.id) for r in self.by_cell.get(cell.pk, ())]
        return valid_time_slot(known + store.valid_froms(cell.pk), observed)

    # --- changing: the interpreter's sink ---------------------------------------------------

    def sink(self, cell: Cell, *, created_by: int, valid_from: datetime,
             now: datetime) -> _CellSink:
        return _CellSink(self, cell.pk, created_by, valid_from, now)

    def new_id(self) -> int:
        self._temp -= 1
        return self._temp

    def provisional_cell(self, namespace_id: int, key: str) -> None:
        """A cell for ``key`` when it names none: for a dry run on a snapshot, which may
        create a key (a negative id; never written)."""
        if key not in self.cells:
            cell = Cell(pk=self.new_id(), namespace_id=namespace_id, key=key, head_id=None)
            self.cells[key], self.heads[cell.pk] = cell, None
            self.created.add(cell.pk)


class _CellSink:
    """One cell of an :class:`Overlay`, as :func:`memory.domain.interpret` changes it."""

    def __init__(self, overlay: Overlay, cell_id: int, created_by: int, valid_from: datetime,
                 now: datetime) -> None:
        self.overlay, self.cell_id, self.created_by = overlay, cell_id, created_by
        self.valid_from, self.now = valid_from, now

    def create(self, effect: NewVersion) -> int:
        row = VersionRow(self.overlay.new_id(), self.cell_id, effect.value, effect.status,
                         effect.supersedes_id, effect.alternative_of_id, self.valid_from, None,
                         0, new=True, created_by=self.created_by,
                         restores_id=effect.restores_id)
        self.overlay._keep(row)
        return row.id

    def carry_support(self, version_id: int, from_id: int) -> None:
        """The writer copies the edges (``writer._carry_support``): they are stored rows."""

    def retype(self, version_id: int, status: Status) -> None:
        row = self.overlay.rows[version_id]
        row.status, row.dirty = status, True
        row.valid_to = valid_to_after(status, row.valid_to, self.now)

    def link_supersedes(self, version_id: int, supersedes_id: int) -> None:
        row = self.overlay.rows[version_id]
        row.supersedes_id, row.dirty = supersedes_id, True

    def support(self, version_id: int) -> None:
        row = self.overlay.rows[version_id]
        row.support += 1
        row.support_delta += 1
        row.dirty = True

    def tombstone(self, version_id: int) -> None:
        """Tombstones are rows of their own: the writer takes them from the outcome."""

    def move_head(self, version_id: int | None) -> None:
        self.overlay.heads[self.cell_id] = version_id


# --- loading ----------------------------------------------------------------------------------


def locked_overlay(namespace: Namespace, keys: Sequence[str], creating: set[str],
                   now: datetime, named: Sequence[int] = ()) -> Overlay:
    """Lock the cells ``keys`` name (in key order, so concurrent batches cannot deadlock on
    them; aliases and freshly created cells still can, and the commit is then run again),
    creating cells for ``creating``, and load their open versions and ``named`` ones.
    Needs the caller's open transaction."""
    assert connection.in_atomic_block, "the overlay is locked inside the commit's transaction"
    overlay = Overlay()
    wanted = sorted(set(keys))
    if wanted:
        overlay.cells.update(store.lock_named_cells(namespace.pk, wanted))
    to_create = sorted(k for k in creating if k not in overlay.cells)
    if to_create:
        made = {c.key: c for c in store.create_cells(namespace.pk, to_create, now)}
        raced = [k for k in to_create if k not in made]  # a writer created it a moment ago
        overlay.cells.update(made)
        if raced:
            overlay.cells.update((k, c) for k, c in store.lock_named_cells(namespace.pk, raced)
                                 .items() if c.key == k)
        # A cell with no head yet was created here (or by a racing writer a moment ago):
        # either way its key embedding is still to be written.
        overlay.created = {overlay.cells[k].pk for k in to_create
                           if k in overlay.cells and overlay.cells[k].head_id is None}
    _expire_locked(namespace, overlay, now)
    for cell in overlay.cells.values():
        overlay.heads[cell.pk] = cell.head_id
    cell_ids = list({c.pk for c in overlay.cells.values()})
    if cell_ids:
        overlay.asked.update(i for i in named if i is not None)
        for record in store.open_versions(cell_ids, [i for i in named if i is not None]):
            overlay.add(record)
    return overlay


def _expire_locked(namespace: Namespace, overlay: Overlay, now: datetime) -> None:
    """SPEC §13: a head whose expiry passed is expired before the batch decides on its cell,
    so an operation never acts on a value no read serves any more."""
    headed = sorted({c.pk for c in overlay.cells.values()
                     if c.head_id is not None and c.expiry_due})
    if headed and expire_due(namespace_id=namespace.pk, now=now, cell_ids=headed):
        heads = dict(Cell.objects.filter(pk__in=headed).values_list("pk", "head_id"))
        for cell in overlay.cells.values():
            cell.head_id = heads.get(cell.pk, cell.head_id)


def snapshot_overlay(namespace: Namespace, keys: Sequence[str]) -> Overlay:
    """The heads (and a contested head's alternatives) of the cells ``keys`` name, read
    without a lock for planning outside a transaction; the drain lock of the namespace keeps
    other commits out until this plan is applied. A key is its cell's own name first, an alias
    of another cell second. What is due to expire is expired first (SPEC §13): a plan is never
    made on a value no read serves any more."""
    expire_due(namespace_id=namespace.pk)
    overlay = Overlay()
    contested = []
    for name, cell_id, key, head_id, *head in store.heads_of(namespace.pk, sorted(set(keys))):
        if name in overlay.cells and overlay.cells[name].key == name:
            continue
        overlay.cells[name] = Cell.from_db(connection.alias, ("id", "namespace_id", "key",
                                                              "head_id"),
                                           (cell_id, namespace.pk, key, head_id))
        overlay.heads[cell_id] = head_id
        if head_id is not None:
            overlay.add(head)
            contested += [cell_id] if head[3] == Status.CONTESTED else []
    if contested:
        for record in store.alternatives_of(sorted(set(contested))):
            overlay.add(record)
    return overlay
