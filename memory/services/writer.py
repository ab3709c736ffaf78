"""The writer: what a batch decided on its overlay, written with ONE statement per table.

Ids come from the sequences up front, so rows reference each other in one pass; rows go in
with ``INSERT ... SELECT FROM unnest(...)``, each column one typed array bound on the server in
binary (decision 19) — Django's ``bulk_create`` built and quoted every field of every row, a
fifth of a commit. The order of the version writes serves the partial unique index
``one_head_per_key``: demote, insert, then promote.

(Over 450 lines on purpose: each table's one statement and the columns it binds sit together,
in the order the commit runs them, so the commit reads top to bottom as the transaction it is.)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection
from psycopg.types.json import Jsonb

from memory.domain import (
    HEAD_STATUSES,
    NEW,
    OPEN_STATUSES,
    REINSTATE,
    SETTLED_CHANNEL,
    Decision,
    EvidenceState,
    Method,
    OpInput,
    Status,
)
from memory.domain.effect_log import effects_record
from memory.domain.render import embedding_text, key_text
from memory.llm.vectors import Vectors
from memory.models import EMBED_DIM, Cell, Evidence, Namespace, Operation

from .binding import Float4Array, bound_cursor
from .changes import EventRow, events_record
from .lexical import stored_terms
from .overlay import Overlay, VersionRow

#: Maps an overlay id (negative: created in this batch) to the stored one.
IdMap = Callable[[int | None], int | None]


@dataclass
class PendingOp:
    """One operation row to write (a reinstate row names the operation that caused it)."""

    key: str
    cell: Cell | None
    item: OpInput
    actor: str
    type: str
    requested: str
    reason: str
    payload: dict[str, Any]
    evidence: Evidence | None
    version_ref: int | None = None
    cause: int | None = None  # reinstate rows: index of the causing operation
    decision: Decision | None = None
    invalid: str | None = None
    reinstated: tuple[int, ...] = ()
    support_refs: tuple[int, ...] = ()
    tomb_refs: tuple[int, ...] = ()
    head_before: int | None = None
    head_after: int | None = None
    new_id: int | None = None
    #: How it was decided (SPEC §3); ``actor`` is who asked.
    method: str = Method.EXPLICIT.value
    #: The cell as this operation left it, for its change event: (the named version's status,
    #: the cell's status, the head's overlay id). Later operations of the batch change the
    #: overlay, so it is taken when the operation is decided.
    after: tuple[str, str, int | None] = ("", "empty", None)


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

    operations = _write_operations(namespace, ops, op_ids, ids, now)
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
    _insert("memory_supportedge", _SUPPORT_COLUMNS, [
        (ids(ref), op.evidence.pk if op.evidence else None, op_id)
        for op, op_id in zip(ops, op_ids, strict=True) for ref in op.support_refs])
    _insert("memory_tombstone", _TOMBSTONE_COLUMNS, [
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

_OPERATION_COLUMNS = (
    ("id", "bigint"), ("namespace_id", "bigint"), ("cell_id", "bigint"), ("key", "varchar"),
    ("type", "varchar"), ("requested", "varchar"), ("actor", "varchar"),
    ("evidence_id", "bigint"), ("seq", "bigint"), ("version_id", "bigint"), ("value", "text"),
    ("payload", "jsonb"), ("reason", "text"), ("raw_output", "text"), ("prompt_tokens", "int"),
    ("completion_tokens", "int"), ("created_at", "timestamptz"), ("method", "varchar"),
    ("source", "varchar"))
_OPERATION_NAMES = tuple(name for name, _ in _OPERATION_COLUMNS)
assert list(_OPERATION_NAMES) == [f.attname for f in Operation._meta.concrete_fields], \
    "keep _OPERATION_COLUMNS in field order"


def _write_operations(namespace: Namespace, ops: Sequence[PendingOp], op_ids: list[int],
                      ids: IdMap, now: datetime) -> list[Callable[[], Operation]]:
    rows = []
    for op, op_id in zip(ops, op_ids, strict=True):
        ev_id, seq = (op.evidence.pk, op.evidence.seq) if op.evidence else (None, None)
        first = op.cause is None  # else a reinstate row, caused by the op it names
        cause = None if first else op_ids[op.cause or 0]
        rows.append((
            op_id, namespace.pk, op.cell.pk if op.cell is not None else None, op.key, op.type,
            str(op.requested), op.actor, ev_id, seq, ids(op.version_ref),
            op.item.value if first else None, _payload(op, ids, cause),
            op.reason if first else f"rollback after operation {cause}",
            op.item.raw_output if first else "", op.item.prompt_tokens if first else 0,
            op.item.completion_tokens if first else 0, now,
            op.method if first else Method.REINSTATE.value,
            op.evidence.source if op.evidence is not None else ""))
    _insert("memory_operation", _OPERATION_COLUMNS, [
        (*row[:11], json.dumps(row[11], cls=DjangoJSONEncoder), *row[12:]) for row in rows])
    return [partial(_stored_operation, row, namespace, op.cell, op.evidence)
            for row, op in zip(rows, ops, strict=True)]


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


def _payload(op: PendingOp, ids: IdMap, cause: int | None) -> dict[str, Any]:
    """An operation's log payload with stored ids (the overlay's are temporary): the version
    it named, the heads before and after, and its effects."""
    payload = dict(op.payload)
    if isinstance(payload.get("version"), int):
        payload["version"] = ids(payload["version"])
    if op.decision is not None and op.cause is None:
        payload["head_before"] = ids(op.head_before)
        payload["head_after"] = ids(op.head_after)
        new_id = op.new_id
        payload.update(effects_record(
            op.decision.effects, lambda v: ids(new_id if v == NEW else v)))
    if cause is not None:
        payload["cause"] = cause
    return payload


def reinstate_op(cause: PendingOp, index: int, version_id: int, status: Status) -> PendingOp:
    """The log row of a predecessor reopened by rollback (decision 5)."""
    return PendingOp(cause.key, cause.cell, cause.item, cause.actor, REINSTATE,
                     cause.item.op, "rollback", {"status": str(status)}, cause.evidence,
                     version_ref=version_id, cause=index, method=Method.REINSTATE.value,
                     after=(str(status), *cause.after[1:]))


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


def _insert(table: str, columns: Sequence[tuple[str, str]], rows: list[tuple[Any, ...]]) -> None:
    """Insert ``rows`` with ONE statement: each column travels as one typed array."""
    if not rows:
        return
    names = ", ".join(name for name, _ in columns)
    arrays = ", ".join(f"%b::{kind}[]" for _, kind in columns)
    with bound_cursor() as cur:
        cur.execute(f"INSERT INTO {table} ({names}) SELECT * FROM unnest({arrays})",
                    [list(col) for col in zip(*rows, strict=True)])


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

# Versions go in with their ordinals (decision 50), numbered by the writer from the locked
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
# the statement that changes it (decision 50). The old status is read from the statement's
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
    leaves its row alone. The moved cells leave the frontier index (decision 15: a
    heap delete, no index insert). Returns the cells whose vectors were missing (marked
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
                            ("texts", text), ("emb_at", _slot(embs, vector)),
                            ("kemb_at", _slot(kembs, kvector)), ("pending", pending),
                            ("terms", terms), ("grown", grown.pop(cell.pk, 0))):
            columns[name].append(value)
    with bound_cursor() as cur:
        cur.execute(_MOVE_HEADS_SQL, {**columns, "now": now, "dim": EMBED_DIM,
                                      "embs": Float4Array(embs, EMBED_DIM),
                                      "kembs": Float4Array(kembs, EMBED_DIM)})
    return unembedded


def _slot(vectors: list[Any], vector: Any) -> int | None:
    """Append ``vector`` (if any) to a flat batch; its index there."""
    if vector is None:
        return None
    vectors.append(vector)
    return len(vectors) - 1


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


# --- evidence ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Settled:
    """What the commit writes on one evidence row besides ``committed``."""

    evidence_id: int
    extracted: dict[str, Any] | None = None  # replaces the stored extraction when given
    vector: Any = None  # the evidence embedding, when the commit computed it
    chat_calls: int = 0  # added to the row's costs
    embed_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


_COSTS = ("chat_calls", "embed_calls", "prompt_tokens", "completion_tokens")


def notify_settled(evidence_ids: Sequence[int]) -> None:
    """Announce that these observations settled (``?wait=1`` listens: memory.selectors.
    settled). Inside a transaction PostgreSQL delivers it only if that commits; outside one,
    at once. A payload stays far below PostgreSQL's 8000 bytes."""
    ids = [str(i) for i in evidence_ids]
    with connection.cursor() as cur:
        for start in range(0, len(ids), 400):
            cur.execute("SELECT pg_notify(%s, %s)",
                        [SETTLED_CHANNEL, ",".join(ids[start:start + 400])])


def mark_committed(done: Sequence[Settled], now: datetime) -> None:
    """ONE UPDATE for the committed evidence rows: committed, with the extraction result and
    the evidence vector where the commit computed them, and what planning cost; and the
    notice that they settled, delivered when the commit's transaction commits."""
    if not done:
        return
    notify_settled([d.evidence_id for d in done])
    vectors: list[Any] = []
    at = [_slot(vectors, d.vector) for d in done]
    costs = ", ".join(f"{c} = e.{c} + v.{c}" for c in _COSTS)
    with bound_cursor() as cur:
        cur.execute(
            "UPDATE memory_evidence AS e SET state = %(state)b, committed_at = %(now)b,"
            f" error = '', extracted = COALESCE(v.extracted, e.extracted), {costs},"
            " embedding = COALESCE((%(embs)b::float4[])[v.at * %(dim)b + 1 :"
            " (v.at + 1) * %(dim)b]::vector, e.embedding)"
            " FROM unnest(%(ids)b::bigint[], %(extracted)b::jsonb[], %(at)b::int[],"
            " %(chat_calls)b::int[], %(embed_calls)b::int[], %(prompt_tokens)b::int[],"
            " %(completion_tokens)b::int[])"
            f" AS v(id, extracted, at, {', '.join(_COSTS)}) WHERE e.id = v.id",
            {"state": str(EvidenceState.COMMITTED), "now": now,
             "ids": [d.evidence_id for d in done],
             "extracted": [json.dumps(d.extracted, cls=DjangoJSONEncoder)
                           if d.extracted is not None else None for d in done],
             "at": at, "embs": Float4Array(vectors, EMBED_DIM), "dim": EMBED_DIM,
             **{c: [getattr(d, c) for d in done] for c in _COSTS}})
