"""The SQL a commit reads with: the cells it locks, their versions, and the lookups the
overlay makes when it must (a rollback chain, a withdrawn value, a late report's slot, the
sources behind a head). Plain statements on Django's connection, rows as tuples: the ORM's
compilation was a tenth of a commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connection

from memory.domain import OPEN_STATUSES, RETRACTED_STATUSES, Status
from memory.models import Cell, Namespace, SupportEdge, Version

from .binding import bound_cursor

#: Cell columns a commit never reads (the embeddings are refreshed after it, elsewhere).
UNUSED_CELL_FIELDS = ("embedding", "key_embedding", "embedded_text")

#: What a commit reads of a cell, in model field order (for ``Cell.from_db``).
CELL_COLUMNS = tuple(f.attname for f in Cell._meta.concrete_fields
                     if f.attname not in UNUSED_CELL_FIELDS)
# A name is its cell's own key first, an alias of another cell second; the rows are locked in
# key order (LockRows runs above the sort), so concurrent batches lock alike.
# ``due``: the head may have reached its expiry (SPEC §13; a minute ahead of the clock, so the
# commit's own time is covered): only then does the commit ask memory.services.expiry.
_LOCK_NAMED_SQL = f"""
SELECT n.name, n.alias,
       EXISTS (SELECT 1 FROM memory_version v WHERE v.id = c.head_id
                AND v.expires_at <= clock_timestamp() + interval '1 minute') AS due,
       {', '.join('c.' + column for column in CELL_COLUMNS)}
  FROM (SELECT key AS name, id, 0 AS alias FROM memory_cell
         WHERE namespace_id = %b AND key = ANY(%b)
        UNION ALL
        SELECT alias, cell_id, 1 FROM memory_keyalias
         WHERE namespace_id = %b AND alias = ANY(%b)) AS n
  JOIN memory_cell c ON c.id = n.id
 ORDER BY c.key, n.alias FOR UPDATE OF c
"""
_CREATE_CELLS_SQL = (
    "INSERT INTO memory_cell (namespace_id, key, created_at, updated_at, embedded_text,"
    " vector_stale) SELECT %b, k, %b, %b, '', false FROM unnest(%b::varchar[]) AS k"
    f" ON CONFLICT (namespace_id, key) DO NOTHING RETURNING {', '.join(CELL_COLUMNS)}")

#: A version as the overlay loads it.
VERSION_COLUMNS = ("id, cell_id, value, status, supersedes_id, alternative_of_id, valid_from,"
                   " valid_to, support")
VersionRecord = Sequence[Any]


def lock_named_cells(namespace_id: int, names: list[str]) -> dict[str, Cell]:
    """``SELECT ... FOR UPDATE`` of the cells ``names`` name — as their own keys or as aliases
    soft identity merged into them — in ONE statement, by name. Rows become model instances
    the way the ORM loads them; the vectors are not needed to decide, and decoding two 384-d
    vectors per cell was a tenth of a commit."""
    found: dict[str, Cell] = {}
    with bound_cursor(binary_results=True) as cur:
        cur.execute(_LOCK_NAMED_SQL, [namespace_id, names, namespace_id, names])
        for name, alias, due, *row in cur.fetchall():
            if not alias or name not in found:
                found[name] = Cell.from_db(connection.alias, CELL_COLUMNS, row)
                found[name].expiry_due = due
    return found


def create_cells(namespace_id: int, keys: list[str], now: datetime) -> list[Cell]:
    """Insert-or-ignore cells for ``keys`` (two writers may create one key at once); the
    cells this statement created, locked as its own rows."""
    with bound_cursor(binary_results=True) as cur:
        cur.execute(_CREATE_CELLS_SQL, [namespace_id, now, now, keys])
        return [Cell.from_db(connection.alias, CELL_COLUMNS, row) for row in cur.fetchall()]


def open_versions(cell_ids: list[int], named_ids: list[int]) -> list[VersionRecord]:
    """Open versions of the cells, plus versions named by id, in one query."""
    with bound_cursor(binary_results=True) as cur:
        cur.execute(f"SELECT {VERSION_COLUMNS} FROM memory_version WHERE cell_id = ANY(%b) AND"
                    " (status = ANY(%b::varchar[]) OR id = ANY(%b::bigint[]))",
                    [cell_ids, sorted(OPEN_STATUSES), named_ids])
        return list(cur.fetchall())


def versions_by_id(ids: list[int]) -> list[VersionRecord]:
    with connection.cursor() as cur:
        cur.execute(f"SELECT {VERSION_COLUMNS} FROM memory_version WHERE id = ANY(%s)", [ids])
        return list(cur.fetchall())


# The walk of memory.domain.rollback in one query: follow supersedes while the version is one
# a rollback walks past, so a revoke reads the nearest predecessors, never the whole history.
_ROLLBACK_CHAIN_SQL = f"""
WITH RECURSIVE chain AS (
    SELECT {VERSION_COLUMNS}, 0 AS depth FROM memory_version WHERE id = %s
    UNION ALL
    SELECT v.id, v.cell_id, v.value, v.status, v.supersedes_id, v.alternative_of_id,
           v.valid_from, v.valid_to, v.support, c.depth + 1
      FROM memory_version v JOIN chain c ON v.id = c.supersedes_id
     WHERE c.status = ANY(%s)
)
SELECT {VERSION_COLUMNS} FROM chain ORDER BY depth
"""


def rollback_chain_rows(first_id: int) -> list[VersionRecord]:
    """The ``supersedes`` chain from ``first_id`` back to the first version a rollback may
    reinstate (:func:`memory.domain.rollback.rollback_chain`, in SQL)."""
    with connection.cursor() as cur:
        cur.execute(_ROLLBACK_CHAIN_SQL, [first_id, sorted(RETRACTED_STATUSES)])
        return list(cur.fetchall())


def versions_newest_first(cell_id: int) -> list[tuple[int, str, str]]:
    """``(id, value, status)`` of every version of the cell, newest first."""
    with connection.cursor() as cur:
        cur.execute("SELECT id, value, status FROM memory_version WHERE cell_id = %s"
                    " ORDER BY id DESC", [cell_id])
        return list(cur.fetchall())


def valid_froms(cell_id: int) -> list[tuple[datetime, int]]:
    """``(valid_from, id)`` of every version of the cell."""
    return list(Version.objects.filter(cell_id=cell_id).values_list("valid_from", "id"))


def trust_levels(namespace: Namespace) -> dict[str, int]:
    """The namespace's source trust levels (read once per batch that places an update)."""
    with bound_cursor() as cur:
        cur.execute("SELECT source, level FROM memory_sourcetrust WHERE namespace_id = %b",
                    [namespace.pk])
        return dict(cur.fetchall())


def support_sources(version_id: int) -> list[str]:
    """The sources of the evidence supporting a stored version."""
    return list(SupportEdge.objects.filter(version_id=version_id, evidence__isnull=False)
                .values_list("evidence__source", flat=True).distinct())


_SNAPSHOT_SQL = f"""
SELECT n.name, c.id, c.key, c.head_id, {', '.join('v.' + c for c in VERSION_COLUMNS.split(', '))}
  FROM (SELECT key AS name, id AS cell_id FROM memory_cell
         WHERE namespace_id = %(ns)s AND key = ANY(%(keys)s)
        UNION ALL
        SELECT alias, cell_id FROM memory_keyalias
         WHERE namespace_id = %(ns)s AND alias = ANY(%(keys)s)) AS n
  JOIN memory_cell c ON c.id = n.cell_id
  LEFT JOIN memory_version v ON v.id = c.head_id
"""


def heads_of(namespace_id: int, keys: list[str]) -> list[tuple[Any, ...]]:
    """Without a lock, in one query: for each key that names a cell (as its own name or an
    alias), ``(name, cell id, cell key, head id, *head version columns)``."""
    with connection.cursor() as cur:
        cur.execute(_SNAPSHOT_SQL, {"ns": namespace_id, "keys": keys})
        return list(cur.fetchall())


def alternatives_of(cell_ids: list[int]) -> list[VersionRecord]:
    with connection.cursor() as cur:
        cur.execute(f"SELECT {VERSION_COLUMNS} FROM memory_version WHERE cell_id = ANY(%s)"
                    " AND status = %s ORDER BY id", [cell_ids, str(Status.ALTERNATIVE)])
        return list(cur.fetchall())
