"""The erased key's rows (SPEC §6): the cell an erase names, every value the key held or was
given, the evidence attached to it, and the one statement that hard-deletes them all. The SQL
fragments here are shared by the erase, its preview and its mention search, so that what is
redacted, deleted around and left out of the mentions is one set."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from django.db import DatabaseError, connection, transaction

from memory.domain import normalize_key
from memory.models import Cell, KeyAlias, Namespace

from .graph import CellNotFound


def find_cell(namespace: Namespace, key: str, *, lock: bool) -> Cell:
    norm = normalize_key(key)
    cells = Cell.objects.select_for_update() if lock else Cell.objects.all()
    cell = cells.filter(namespace=namespace, key=norm).only("id", "key").first()
    if cell is None:
        alias = KeyAlias.objects.filter(namespace=namespace, alias=norm).first()
        if alias is None:
            raise CellNotFound(norm)
        cell = cells.only("id", "key").get(pk=alias.cell_id)
    return cell


def lock_cell(namespace: Namespace, key: str) -> Cell:
    return find_cell(namespace, key, lock=True)


#: The key's operations: its cell's, and those refused before it had a cell (cell NULL, the
#: key or an alias by name; op_key_idx).
KEY_OPS = ("SELECT id, evidence_id, value FROM memory_operation WHERE cell_id = %(cell)s"
            " UNION ALL SELECT id, evidence_id, value FROM memory_operation"
            " WHERE namespace_id = %(ns)s AND key = ANY(%(names)s) AND cell_id IS NULL")
#: Evidence attached to the key: it supports one of its versions or produced one of its
#: operations (support_evidence_idx is not needed: edges are found from the versions).
ATTACHED = ("SELECT s.evidence_id AS id FROM memory_supportedge s"
             " JOIN memory_version v ON v.id = s.version_id"
             " WHERE v.cell_id = %(cell)s AND s.evidence_id IS NOT NULL"
             f" UNION SELECT evidence_id FROM ({KEY_OPS}) k WHERE evidence_id IS NOT NULL")


def values_of(namespace_id: int, cell_id: int, names: list[str]) -> tuple[list[str], list[str]]:
    """Every value the key held or was given, newest first: its versions' values and every
    value its operations carried (a refused one's too: an operation may name a version and
    carry another value); and, apart, every other string its versions' metadata held, which
    goes with them. (Metadata numbers and booleans go with the facts that carry them; in text
    they are not looked for.)"""
    with connection.cursor() as cur:
        cur.execute("SELECT value, bool_and(meta) FROM ("
                    " SELECT value, id AS at, false AS meta FROM memory_version"
                    " WHERE cell_id = %(cell)s"
                    f" UNION ALL SELECT value, 0, false FROM ({KEY_OPS}) k"
                    " WHERE value IS NOT NULL"
                    " UNION ALL SELECT m.value #>> '{}', 0, true FROM memory_version v"
                    " CROSS JOIN LATERAL jsonb_each(CASE WHEN jsonb_typeof(v.metadata) ="
                    " 'object' THEN v.metadata ELSE '{}'::jsonb END) m"
                    " WHERE v.cell_id = %(cell)s AND jsonb_typeof(m.value) = 'string'"
                    ") v GROUP BY value ORDER BY max(at) DESC",
                    {"ns": namespace_id, "cell": cell_id, "names": names})
        rows = cur.fetchall()
    return ([v for v, meta in rows if not meta],
            [v for v, meta in rows if meta and v.strip()])


def key_digest(key: str) -> str:
    """What the audit keeps of an erased key: its SHA-256, never the name (SPEC §6)."""
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def name_forms(names: Sequence[str]) -> list[str]:
    """The key's names as the redaction looks for them: canonical (``secret_code``) and as
    words (``secret code``, which folds equal to ``Secret Code``)."""
    return sorted({form for n in names for form in (n, n.replace("_", " ").strip())
                   if form})


#: Everything of the key in ONE statement (its foreign keys are deferred, so the order of the
#: deletes does not matter), which answers the number of versions and whether anything OUTSIDE
#: the key points at a deleted row. Nothing does by construction (a key's versions, operations,
#: edges and tombstones only point at each other); it is checked because the delete may run
#: without the row-by-row foreign-key triggers (_without_fk_triggers). The check sees the rows
#: as they were before the statement, so the key's own rows are told apart by their cell.
_DELETE_KEY = """
WITH versions AS (DELETE FROM memory_version WHERE cell_id = %(cell)s RETURNING id),
ops AS (DELETE FROM memory_operation WHERE cell_id = %(cell)s OR (namespace_id = %(ns)s
        AND key = ANY(%(names)s) AND cell_id IS NULL) RETURNING id),
edges AS (DELETE FROM memory_supportedge s USING versions v WHERE s.version_id = v.id),
spans AS (DELETE FROM memory_versionspan WHERE cell_id = %(cell)s),  -- span_cell_idx
tombs AS (DELETE FROM memory_tombstone t USING versions v WHERE t.version_id = v.id),
aliases AS (DELETE FROM memory_keyalias WHERE cell_id = %(cell)s),
copy AS (DELETE FROM memory_frontiervector WHERE cell_id = %(cell)s),
cell AS (DELETE FROM memory_cell WHERE id = %(cell)s)
SELECT (SELECT count(*) FROM versions),
  EXISTS (SELECT 1 FROM versions d JOIN memory_version x ON x.supersedes_id = d.id
           WHERE x.cell_id <> %(cell)s)
  OR EXISTS (SELECT 1 FROM versions d JOIN memory_version x ON x.alternative_of_id = d.id
              WHERE x.cell_id <> %(cell)s)
  OR EXISTS (SELECT 1 FROM ops d JOIN memory_version x ON x.created_by_id = d.id
              WHERE x.cell_id <> %(cell)s)
  OR EXISTS (SELECT 1 FROM versions d JOIN memory_operation o ON o.version_id = d.id
              WHERE o.cell_id IS DISTINCT FROM %(cell)s
                AND NOT (o.cell_id IS NULL AND o.key = ANY(%(names)s)))
  OR EXISTS (SELECT 1 FROM ops d JOIN memory_supportedge s ON s.operation_id = d.id
              JOIN memory_version v ON v.id = s.version_id WHERE v.cell_id <> %(cell)s)
  OR EXISTS (SELECT 1 FROM ops d JOIN memory_tombstone t ON t.operation_id = d.id
              JOIN memory_version v ON v.id = t.version_id WHERE v.cell_id <> %(cell)s)
  OR EXISTS (SELECT 1 FROM versions d JOIN memory_cell c ON c.head_id = d.id
              WHERE c.id <> %(cell)s)"""


class DanglingReference(Exception):
    """Something outside the key pointed into it: the erase is rolled back."""


def delete_key(namespace_id: int, cell_id: int, names: list[str]) -> int:
    """Hard-delete the key's rows; returns the number of versions.

    PostgreSQL checks a deferred foreign key with one or two queries per deleted row at
    commit: 30 s for a key of 100,000 versions. When the database role may set
    ``session_replication_role`` (a superuser, as the embedded server's, or a role granted
    ``SET`` on it), the delete runs without those triggers and checks itself, through the
    foreign-key indexes, that nothing outside the key points at what it deleted; otherwise
    the triggers check (docs/decisions.md, "Privacy erase")."""
    with connection.cursor() as cur:
        bypass = _without_fk_triggers(cur)
        cur.execute(_DELETE_KEY, {"ns": namespace_id, "cell": cell_id, "names": names})
        versions, dangling = cur.fetchone()
        if bypass:
            cur.execute("SET LOCAL session_replication_role = origin")
    if dangling:
        raise DanglingReference(f"rows outside cell {cell_id} point into it")
    return int(versions)


def key_rows_delete(*, namespace_id: int, cell_id: int) -> int:
    """The erase's deletion step alone (step 3): every row of the key, inside the caller's
    transaction, for a caller that deletes every observation of the namespace too — a
    namespace's delete (memory.services.namespace_delete) — so there is nothing to redact.
    Returns the number of versions."""
    names = [*Cell.objects.filter(pk=cell_id).values_list("key", flat=True),
             *KeyAlias.objects.filter(cell_id=cell_id).values_list("alias", flat=True)]
    return delete_key(namespace_id, cell_id, names)


def _without_fk_triggers(cur: Any) -> bool:
    """Turn the foreign-key triggers off for the rest of the transaction, if allowed."""
    try:
        with transaction.atomic():  # a savepoint: a refusal must not abort the erase
            cur.execute("SET LOCAL session_replication_role = replica")
    except DatabaseError:
        return False
    return True
