"""The writer: what a batch decided on its overlay, written with ONE statement per table.

Ids come from the sequences up front, so rows reference each other in one pass; rows go in
with ``INSERT ... SELECT FROM unnest(...)``, each column one typed array bound on the server in
binary — Django's ``bulk_create`` built and quoted every field of every row, a
fifth of a commit. The order of the version writes serves the partial unique index
``one_head_per_key``: demote, insert, then promote.

Beside it: the operation log's rows (``write_ops``) and the evidence rows marked committed
(``settle``); their names are importable from here too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection
from psycopg.types.json import Jsonb

from memory.domain import (
    HEAD_STATUSES,
    OPEN_STATUSES,
)
from memory.domain.render import embedding_text, key_text
from memory.llm.vectors import Vectors
from memory.models import EMBED_DIM, Namespace, Operation

from .binding import Float4Array, bound_cursor, insert_rows, vector_slot
from .changes import EventRow, events_record
from .lexical import stored_terms
from .overlay import Overlay, VersionRow
from .settle import Settled, mark_committed, notify_settled
from .write_ops import IdMap, PendingOp, reinstate_op, write_operations


@dataclass
class Written:
    #: One per pending op, in order: each builds its row's model instance when asked (an
    #: observation's commit never asks; a person's operation renders it).
    operations: list[Callable[[], Operation]]
    ids: IdMap
    unembedded: set[int] = field(default_factory=set)  # moved cells whose vector is unknown


def write(namespace: Namespace, overlay: Overlay, ops: Sequence[PendingOp], now: datetime,
          vectors: Vectors) -> Written:
    if not ops:  # an observation without facts: nothing was decided
        return Written([], lambda ref: ref)
    new_rows = sorted((r for r in overlay.rows.values() if r.new), key=lambda r: -r.id)
    version_ids, op_ids = _allocate_ids(len(new_rows), len(ops))
    real = {r.id: vid for r, vid in zip(new_rows, version_ids, strict=True)}

    def ids(ref: int | None) -> int | None:
        return real.get(ref, ref) if ref is not None else None

    operations = write_operations(namespace, ops, op_ids, ids, now)
    stored = [r for r in overlay.rows.values() if not r.new and r.dirty]
    _update_versions([r for r in stored if r.status not in HEAD_STATUSES], ids, now)
    grown, ordinals = _number_versions(overlay, new_rows)
    carried = _carried_metadata(new_rows, ops)
    _insert_versions([
        (ids(r.id), namespace.pk, r.cell_id, r.value, str(r.status), r.valid_from, r.valid_to,
         r.support, op_ids[r.created_by or 0], ids(r.supersedes_id), ids(r.alternative_of_id),
         now, r.restores_id, carried[r.id][1], _expiry(ops[r.created_by or 0]), ordinal,
         carried[r.id][0])
        for r, ordinal in zip(new_rows, ordinals, strict=True)], now)
    _update_versions([r for r in stored if r.status in HEAD_STATUSES], ids, now)
    insert_rows("memory_supportedge", _SUPPORT_COLUMNS, [
        (ids(ref), op.evidence.pk if op.evidence else None, op_id)
        for op, op_id in zip(ops, op_ids, strict=True) for ref in op.support_refs])
    insert_rows("memory_tombstone", _TOMBSTONE_COLUMNS, [
        (ids(ref), op_id, now) for op, op_id in zip(ops, op_ids, strict=True)
        for ref in op.tomb_refs])
    _carry_support([(ids(r.id), r.restores_id, op_ids[r.created_by or 0])
                    for r in new_rows if r.restores_id is not None])
    _set_expiry([(ids(ref), op.payload["expires_at"]) for op in ops
                 for ref in op.support_refs if op.payload.get("expires_at")], now)
    written = Written(operations, ids)
    written.unembedded = _move_heads(namespace.pk, overlay, ids, now, vectors, grown)
    _grow_version_counts(grown)  # the cells that gained versions but kept their head
    _drop_unused_cells(overlay)
    events_record(namespace.pk, [
        _event(op, op_id, None if op.cause is None else op_ids[op.cause], ids)
        for op, op_id in zip(ops, op_ids, strict=True)])
    return written


def _event(op: PendingOp, op_id: int, cause: int | None, ids: IdMap) -> EventRow:
    """The change event of one operation, as its log row says it: the head it displaced is
    its ``previous`` (a reinstatement's is on the retraction that caused it)."""
    status, cell, head = op.after
    moved = cause is None and op.decision is not None and op.head_before != op.head_after
    return EventRow(
        op_id, op.type, op.key, ids(op.version_ref), op.item.value if cause is None else None,
        ids(op.head_before) if moved else None, ids(head), status, cell, op.actor, op.method,
        op.reason if cause is None else f"rollback after operation {cause}",
        op.evidence.pk if op.evidence is not None else None)


# --- operations -------------------------------------------------------------------------------

# --- versions, edges, heads -------------------------------------------------------------------

_VERSION_COLUMNS = (
    ("id", "bigint"), ("namespace_id", "bigint"), ("cell_id", "bigint"), ("value", "text"),
    ("status", "varchar"), ("valid_from", "timestamptz"), ("valid_to", "timestamptz"),
    ("support", "int"), ("created_by_id", "bigint"), ("supersedes_id", "bigint"),
    ("alternative_of_id", "bigint"), ("created_at", "timestamptz"), ("restores_id", "bigint"),
    ("metadata", "jsonb"), ("expires_at", "timestamptz"))
#: Carried with the versions' columns, not stored: the version whose metadata one starts from.
_BASE_COLUMN = ("base_id", "bigint")
_SUPPORT_COLUMNS = (("version_id", "bigint"), ("evidence_id", "bigint"),
                    ("operation_id", "bigint"))
_TOMBSTONE_COLUMNS = (("version_id", "bigint"), ("operation_id", "bigint"),
                      ("created_at", "timestamptz"))


_CARRY_SQL = """
WITH carried AS (
    INSERT INTO memory_supportedge (version_id, evidence_id, operation_id)
    SELECT DISTINCT r.version_id, e.evidence_id, r.operation_id
      FROM unnest(%b::bigint[], %b::bigint[], %b::bigint[]) AS r(version_id, restores, operation_id)
      JOIN memory_supportedge AS e ON e.version_id = r.restores AND e.evidence_id IS NOT NULL
    RETURNING version_id
)
UPDATE memory_version AS v SET support = v.support + c.n
  FROM (SELECT version_id, count(*) AS n FROM carried GROUP BY version_id) AS c
 WHERE v.id = c.version_id
"""


def _carry_support(rows: list[tuple[int | None, int, int]]) -> None:
    """``restore`` (SPEC §3): each restoring version gets ``supported_by`` edges to the
    evidence of the version it restores, one per distinct evidence, and its support count
    grows by as many — ONE statement, and none when the batch restores nothing."""
    if not rows:
        return
    with bound_cursor() as cur:
        cur.execute(_CARRY_SQL, [[r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]])


def _carried_metadata(new_rows: list[VersionRow], ops: Sequence[PendingOp],
                      ) -> dict[int, tuple[int | None, Jsonb | None]]:
    """Each new version's metadata as ``(stored version it starts from, its own entries)``
    (SPEC §11.4): it starts from the version it restores, else the head it supersedes or
    contests, and its fact's metadata overlays that key by key. A base created in this batch
    is followed back to a stored one, its own entries overlaid on the way (the statement
    that inserts the versions cannot read the ones it inserts)."""
    out: dict[int, tuple[int | None, dict[str, Any]]] = {}
    for row in sorted(new_rows, key=lambda r: -r.id):  # in the order they were created
        own = ops[row.created_by or 0].payload.get("metadata") or {}
        base = row.restores_id or row.supersedes_id or row.alternative_of_id
        if base is not None and base in out:
            base, inherited = out[base]
            own = {**inherited, **own}
        elif base is not None and base < 0:  # a new version not among these: none to carry
            base = None
        out[row.id] = (base, own)
    return {i: (base, Jsonb(own) if own else None) for i, (base, own) in out.items()}


def _expiry(op: PendingOp) -> datetime | None:
    """When the version expires (SPEC §13): its fact's ``expires_at``, or never."""
    raw = op.payload.get("expires_at")
    return datetime.fromisoformat(raw) if raw else None


def _set_expiry(rows: list[tuple[int | None, str]], now: datetime) -> None:
    """SPEC §13: a fact with an expiry that supports a value (the same value sent again) sets
    that value's expiry — never before the commit, so no past reads other than they were."""
    if rows:
        with bound_cursor() as cur:
            cur.execute("UPDATE memory_version AS v SET expires_at = GREATEST(u.e, %b)"
                        " FROM unnest(%b::bigint[], %b::timestamptz[]) AS u(id, e)"
                        " WHERE v.id = u.id AND v.status = ANY(%b::varchar[])",
                        [now, [r[0] for r in rows], [datetime.fromisoformat(r[1]) for r in rows],
                         sorted(s.value for s in OPEN_STATUSES)])


# A new version starts from its base's metadata (_carried_metadata), its own entries over it.
_SELECTED = {"metadata": "NULLIF(COALESCE((SELECT r.metadata FROM memory_version r"
                         " WHERE r.id = u.base_id), '{}'::jsonb)"
                         " || COALESCE(u.metadata, '{}'::jsonb), '{}'::jsonb)"}

# Versions go in with their ordinals (history pages seek by them), numbered by the writer from the locked
# cells' counts (:func:`_number_versions`); each new version opens its first span.
_INSERT_VERSIONS_SQL = f"""
WITH u AS (
    SELECT * FROM unnest({', '.join(f'%b::{kind}[]' for _, kind in _VERSION_COLUMNS)}, %b::int[],
                         %b::{_BASE_COLUMN[1]}[])
        AS u({', '.join(name for name, _ in _VERSION_COLUMNS)}, ordinal, {_BASE_COLUMN[0]})
), inserted AS (
    INSERT INTO memory_version ({', '.join(name for name, _ in _VERSION_COLUMNS)}, ordinal)
    SELECT {', '.join(_SELECTED.get(name, f"u.{name}") for name, _ in _VERSION_COLUMNS)},
           u.ordinal
      FROM u
    RETURNING id, cell_id, status
)
INSERT INTO memory_versionspan (cell_id, version_id, status, since)
SELECT cell_id, id, status, %b FROM inserted
"""


def _number_versions(overlay: Overlay, new_rows: list[VersionRow],
                     ) -> tuple[dict[int, int], list[int]]:
    """How many versions each cell gains, and each new version's ordinal: its cell's count
    so far plus its place among the cell's new ones, in id order. The cells are locked and
    their counts were read with the lock, so no other commit numbers them meanwhile; the
    count is raised in the statement that moves the head, so the cell's row is written once
    per commit."""
    counts = {c.pk: c.version_count for c in overlay.cells.values()}
    grown: dict[int, int] = {}
    ordinals = []
    for row in new_rows:
        grown[row.cell_id] = grown.get(row.cell_id, 0) + 1
        ordinals.append(counts[row.cell_id] + grown[row.cell_id])
    for cell in overlay.cells.values():
        cell.version_count = counts[cell.pk] + grown.get(cell.pk, 0)
    return grown, ordinals


def _insert_versions(rows: list[tuple[Any, ...]], now: datetime) -> None:
    """ONE statement: the new versions, numbered, and their first spans."""
    if not rows:
        return
    with bound_cursor() as cur:
        cur.execute(_INSERT_VERSIONS_SQL,
                    [*[list(col) for col in zip(*rows, strict=True)], now])


def _grow_version_counts(grown: dict[int, int]) -> None:
    """Raise the version counts :func:`_move_heads` did not (it takes its cells' out)."""
    if grown:
        with bound_cursor() as cur:
            cur.execute("UPDATE memory_cell AS c SET version_count = c.version_count + g.n"
                        " FROM unnest(%b::bigint[], %b::int[]) AS g(id, n) WHERE c.id = g.id",
                        [list(grown), list(grown.values())])


# A status change closes the version's open span at the commit time and opens the next one, in
# the statement that changes it (time travel reads spans). The old status is read from the statement's
# snapshot (the join below), so a version whose status did not change keeps its span.
_UPDATE_VERSIONS_SQL = """
WITH changed AS (
    UPDATE memory_version AS t SET status = v.status, valid_to = v.valid_to,
           support = t.support + v.delta, supersedes_id = v.sup
      FROM (SELECT u.*, o.status AS old FROM unnest(%(ids)b::bigint[], %(statuses)b::varchar[],
                   %(valid_to)b::timestamptz[], %(deltas)b::int[], %(sups)b::bigint[])
                   AS u(id, status, valid_to, delta, sup)
              JOIN memory_version o ON o.id = u.id) AS v
     WHERE t.id = v.id
    RETURNING t.id, t.cell_id, t.status, v.old
), retyped AS (
    SELECT * FROM changed WHERE status <> old
), closed AS (
    UPDATE memory_versionspan AS s SET until = %(now)b
      FROM retyped WHERE s.version_id = retyped.id AND s.until IS NULL
)
INSERT INTO memory_versionspan (cell_id, version_id, status, since)
SELECT cell_id, id, status, %(now)b FROM retyped
"""


def _update_versions(rows: list[VersionRow], ids: IdMap, now: datetime) -> None:
    """One statement for many versions: status, interval, support and supersedes edge, and
    the spans of the versions whose status changed."""
    if not rows:
        return
    with bound_cursor() as cur:
        cur.execute(_UPDATE_VERSIONS_SQL, {
            "ids": [r.id for r in rows], "statuses": [str(r.status) for r in rows],
            "valid_to": [r.valid_to for r in rows], "deltas": [r.support_delta for r in rows],
            "sups": [ids(r.supersedes_id) for r in rows], "now": now})


def _allocate_ids(n_versions: int, n_operations: int) -> tuple[list[int], list[int]]:
    """Ids from the sequences, in increasing order (``supersedes`` points strictly back)."""
    with bound_cursor() as cur:
        cur.execute(
            "SELECT array(SELECT nextval('memory_version_id_seq') FROM generate_series(1, %b)),"
            " array(SELECT nextval('memory_operation_id_seq') FROM generate_series(1, %b))",
            [n_versions, n_operations])
        versions, operations = cur.fetchone()
    return sorted(versions), sorted(operations)


_MOVE_HEADS_SQL = """
WITH v AS (
    SELECT id, head, set_emb, text, pending, terms, grown,
           (%(embs)b::float4[])[emb_at * %(dim)b + 1 : (emb_at + 1) * %(dim)b]::vector AS emb,
           (%(kembs)b::float4[])[kemb_at * %(dim)b + 1 : (kemb_at + 1) * %(dim)b]::vector AS kemb
      FROM unnest(%(ids)b::bigint[], %(heads)b::bigint[], %(set_emb)b::bool[], %(texts)b::text[],
                  %(emb_at)b::int[], %(kemb_at)b::int[], %(pending)b::bool[], %(terms)b::text[],
                  %(grown)b::int[])
           AS u(id, head, set_emb, text, emb_at, kemb_at, pending, terms, grown)
), moved AS (
    UPDATE memory_cell AS c SET head_id = v.head, updated_at = %(now)b,
           embedded_text = CASE WHEN v.set_emb THEN v.text ELSE c.embedded_text END,
           embedding = CASE WHEN v.set_emb THEN v.emb ELSE c.embedding END,
           key_embedding = COALESCE(c.key_embedding, v.kemb),
           embed_pending = v.pending, terms = string_to_array(v.terms, ' '),
           vector_stale = true, version_count = c.version_count + v.grown
      FROM v WHERE c.id = v.id
    RETURNING c.id
)
DELETE FROM memory_frontiervector AS f USING moved WHERE f.cell_id = moved.id
"""


def _move_heads(namespace_id: int, overlay: Overlay, ids: IdMap, now: datetime,
                vectors: Vectors, grown: dict[int, int]) -> set[int]:
    """ONE UPDATE for every cell the batch changed: the head pointer, its lexical terms and,
    when ``vectors`` hold the new ``key: value`` (a cheap embedder's always do), its embedding
    too, and its version count raised by what it ``grown`` (taken out of it), so the row is
    rewritten once; a created cell also gets its key embedding. A supported head (noop)
    leaves its row alone. The moved cells leave the frontier index (a
    heap delete, no HNSW insert inside the commit). Returns the cells whose vectors were missing (marked
    ``embed_pending``), for the refresh after commit."""
    touched = [c for c in {c.pk: c for c in overlay.cells.values()}.values()
               if c.pk in overlay.changed]
    if not touched:
        return set()
    unembedded: set[int] = set()
    columns: dict[str, list[Any]] = {n: [] for n in ("ids", "heads", "set_emb", "texts",
                                                     "emb_at", "kemb_at", "pending", "terms",
                                                     "grown")}
    embs: list[Any] = []
    kembs: list[Any] = []
    for cell in touched:
        head = overlay.heads.get(cell.pk)
        cell.head_id, cell.updated_at = ids(head), now
        text = embedding_text(cell.key, overlay.rows[head].value) if head is not None else ""
        vector = vectors.get(text) if text else None
        known = text == "" or vector is not None
        kvector = vectors.get(key_text(cell.key)) if cell.pk in overlay.created else None
        pending = not known or (cell.pk in overlay.created and kvector is None)
        if pending:
            unembedded.add(cell.pk)
        terms = (stored_terms(namespace_id, cell.key, overlay.rows[head].value)
                 if head is not None else None)
        for name, value in (("ids", cell.pk), ("heads", cell.head_id), ("set_emb", known),
                            ("texts", text), ("emb_at", vector_slot(embs, vector)),
                            ("kemb_at", vector_slot(kembs, kvector)), ("pending", pending),
                            ("terms", terms), ("grown", grown.pop(cell.pk, 0))):
            columns[name].append(value)
    with bound_cursor() as cur:
        cur.execute(_MOVE_HEADS_SQL, {**columns, "now": now, "dim": EMBED_DIM,
                                      "embs": Float4Array(embs, EMBED_DIM),
                                      "kembs": Float4Array(kembs, EMBED_DIM)})
    return unembedded


def _drop_unused_cells(overlay: Overlay) -> None:
    """Cells created for a fact that then did not use them (a group creates the cells of all
    its keys up front; a withdrawn value of an unknown key uses none) are deleted again, so no
    empty cell is left behind. Guarded: a cell anything refers to (a racing writer's) stays."""
    unused = sorted(overlay.created - overlay.changed)
    if not unused:
        return
    with connection.cursor() as cur:
        cur.execute(
            "DELETE FROM memory_cell AS c WHERE c.id = ANY(%s) AND c.head_id IS NULL"
            " AND NOT EXISTS (SELECT 1 FROM memory_operation o WHERE o.cell_id = c.id)"
            " AND NOT EXISTS (SELECT 1 FROM memory_version v WHERE v.cell_id = c.id)"
            " AND NOT EXISTS (SELECT 1 FROM memory_keyalias a WHERE a.cell_id = c.id)",
            [unused])
    for key in [k for k, c in overlay.cells.items() if c.pk in unused]:
        del overlay.cells[key]


__all__ = ["IdMap", "PendingOp", "Settled", "Written", "mark_committed", "notify_settled",
           "reinstate_op", "write"]
