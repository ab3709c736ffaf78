"""A key's versions, page by page, now or as of a past time (SPEC §9, §10).

Everything here costs the same number of statements, with the same plans, whether a key holds
a hundred versions or a million: pages are keysets on ``(cell, ordinal)``
(``version_ordinal_unique``), totals come from ``Cell.version_count`` (or, as of T, from the
last version created by T: ``version_cell_created_idx``), and "as of T" reads the status spans
the commit keeps (:class:`memory.models.VersionSpan`): a version's status at T is its last span
that began by T (``span_version_idx``), the head at T the last head-status span that began by T
if it is still open at T (``span_head_idx``), the alternatives at T those whose span covers T
and began since the contest did (``span_alternative_idx``). Nothing here replays operations.

Each docstring states its statement count. ``as_of`` is an aware datetime (the callers parse
it with :func:`memory.domain.instants.parse_instant`). A parameter that names something this
key does not have raises :class:`memory.domain.BadParameter` naming it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection

from memory.domain import HEAD_STATUSES, OPEN_STATUSES, BadParameter, Status
from memory.domain.metadata import Metadata
from memory.models import Cell, VersionSpan

from .shapes import stored_json

#: Default and largest page of history (CONTRACT).
HISTORY_DEFAULT = 50
HISTORY_MAX = 1000
#: A value search counts its matches up to this many (its ``total`` is then a lower bound).
SEARCH_COUNT_CAP = 10_000
#: An as-of head's support is counted up to this many edges.
SUPPORT_COUNT_CAP = 100_000

_HEAD = tuple(str(s) for s in HEAD_STATUSES)


@dataclass(frozen=True)
class Entry:
    """One version as a history page shows it (statuses and interval as of the read)."""

    version: int
    ordinal: int
    value: str
    status: str
    valid_from: datetime
    valid_to: datetime | None
    support: int | None  # None as of a past time (only the head's is counted then)
    created_at: datetime
    # The version's own (a version's metadata and expiry never change), read with it.
    metadata: Metadata | None = None
    expires_at: datetime | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"version": self.version, "ordinal": self.ordinal, "value": self.value,
                "status": self.status, "valid_from": self.valid_from, "valid_to": self.valid_to,
                "support": self.support, "created_at": self.created_at}


# --- cursors --------------------------------------------------------------------------------


def cursor_for(cell: Cell, ordinal: int) -> str:
    """The keyset cursor of a history page that ends at ``ordinal`` (opaque to clients)."""
    return f"{cell.pk}-{ordinal}"


def parse_cursor(cell: Cell, raw: str, field: str = "before") -> int:
    """The ordinal a cursor names; a cursor of another key, or not a cursor, is refused."""
    cell_part, _, ordinal = raw.partition("-")
    if not (cell_part.isascii() and cell_part.isdigit() and ordinal.isascii()
            and ordinal.isdigit() and len(raw) <= 40):
        raise BadParameter(field, "not a history cursor (take it from history_next or next)")
    if int(cell_part) != cell.pk:
        raise BadParameter(field, "this cursor belongs to another key's history")
    return int(ordinal)


# --- as of T: counts, head, statuses ----------------------------------------------------------


def count_as_of(cell: Cell, as_of: datetime | None) -> int:
    """How many versions the key held at ``as_of`` (now: the counter). One statement as of
    T (two index probes on ``version_cell_created_idx``), none for now."""
    if as_of is None:
        return cell.version_count
    with connection.cursor() as cur:
        cur.execute(
            "SELECT max(ordinal) FROM memory_version WHERE cell_id = %s AND created_at ="
            " (SELECT max(created_at) FROM memory_version WHERE cell_id = %s"
            " AND created_at <= %s)", [cell.pk, cell.pk, as_of])
        row = cur.fetchone()
    return int(row[0]) if row and row[0] is not None else 0


_HEAD_AT_SQL = f"""
SELECT s.version_id, s.status, s.since, s.until FROM memory_versionspan s
 WHERE s.cell_id = %s AND s.status IN ('{_HEAD[0]}', '{_HEAD[1]}') AND s.since <= %s
 ORDER BY s.since DESC, s.id DESC LIMIT 1
"""


def head_as_of(cell: Cell, as_of: datetime) -> tuple[int, str] | None:
    """The head (version id, status) at ``as_of``, or None (empty). One statement."""
    with connection.cursor() as cur:
        cur.execute(_HEAD_AT_SQL, [cell.pk, as_of])
        row = cur.fetchone()
    if row is None or (row[3] is not None and row[3] <= as_of):
        return None
    return int(row[0]), str(row[1])


# The alternatives open at T: alternative spans that began since the contest did (the end of the
# last active span before T) and cover T.
_ALTERNATIVES_AT_SQL = f"""
SELECT v.id, v.value, v.support, v.valid_from, v.ordinal, v.metadata, v.expires_at
  FROM memory_versionspan s
  JOIN memory_version v ON v.id = s.version_id
 WHERE s.cell_id = %(cell)s AND s.status = '{Status.ALTERNATIVE}' AND s.since <= %(t)s
   AND s.since >= COALESCE((
       SELECT a.until FROM memory_versionspan a
        WHERE a.cell_id = %(cell)s AND a.status IN ('{_HEAD[0]}', '{_HEAD[1]}')
          AND a.status = '{Status.ACTIVE}' AND a.since <= %(t)s
        ORDER BY a.since DESC, a.id DESC LIMIT 1), '-infinity')
   AND (s.until IS NULL OR s.until > %(t)s)
 ORDER BY v.id
"""


def alternatives(cell: Cell, as_of: datetime | None = None) -> list[dict[str, Any]]:
    """The cell's alternatives (oldest first) now or at ``as_of``. One statement; as of T its
    cost follows the contest open at T, not the key's history."""
    with connection.cursor() as cur:
        if as_of is None:
            cur.execute("SELECT id, value, support, valid_from, ordinal, metadata, expires_at"
                        " FROM memory_version"
                        " WHERE cell_id = %s AND status = %s ORDER BY id",
                        [cell.pk, str(Status.ALTERNATIVE)])
        else:
            cur.execute(_ALTERNATIVES_AT_SQL, {"cell": cell.pk, "t": as_of})
        rows = cur.fetchall()
    return [{"version": r[0], "value": r[1], "support": r[2] if as_of is None else None,
             "valid_from": r[3], "ordinal": r[4], "metadata": stored_json(r[5]),
             "expires_at": r[6]} for r in rows]


def support_as_of(version_id: int, as_of: datetime) -> int:
    """Support edges of a version committed by ``as_of`` (counted up to SUPPORT_COUNT_CAP).
    One statement."""
    with connection.cursor() as cur:
        cur.execute(
            # The operation's time by its primary key, edge by edge (a join let the planner
            # hash every operation of the namespace).
            "SELECT count(*) FROM (SELECT 1 FROM memory_supportedge s WHERE s.version_id = %s"
            " AND (SELECT o.created_at FROM memory_operation o WHERE o.id = s.operation_id)"
            " <= %s LIMIT %s) AS x",
            [version_id, as_of, SUPPORT_COUNT_CAP])
        row = cur.fetchone()
    return int(row[0]) if row else 0


# --- history pages ----------------------------------------------------------------------------

# A version as of T: its status from its last span that began by T; its interval end as it was
# then (open while its status was open, else the earlier of its end and the span's start).
_AS_OF_COLUMNS = f"""
    v.id, v.ordinal, v.value, sp.status, v.valid_from,
    CASE WHEN sp.status IN ({', '.join(f"'{s}'" for s in sorted(OPEN_STATUSES))}) THEN NULL
         ELSE LEAST(COALESCE(v.valid_to, sp.since), sp.since) END,
    NULL::int, v.created_at, v.metadata, v.expires_at"""
SPAN_AT = """
  CROSS JOIN LATERAL (SELECT s.status, s.since FROM memory_versionspan s
                       WHERE s.version_id = v.id AND s.since <= %(t)s
                       ORDER BY s.since DESC, s.id DESC LIMIT 1) AS sp"""
_NOW_COLUMNS = ("v.id, v.ordinal, v.value, v.status, v.valid_from, v.valid_to, v.support,"
                " v.created_at, v.metadata, v.expires_at")


def _entries_sql(as_of: datetime | None, search: bool, descending: bool = True) -> str:
    columns = _AS_OF_COLUMNS if as_of is not None else _NOW_COLUMNS
    lateral = SPAN_AT if as_of is not None else ""
    match = (" AND pmem_tsv(v.namespace_id, v.value) @@ %(query)s::tsquery"
             " AND strpos(pmem_fold(v.value), %(folded)s) > 0") if search else ""
    order = "DESC" if descending else "ASC"
    return (f"SELECT {columns} FROM memory_version v{lateral}"
            f" WHERE v.cell_id = %(cell)s AND v.ordinal >= %(lo)s AND v.ordinal <= %(hi)s{match}"
            f" ORDER BY v.ordinal {order} LIMIT %(limit)s")


def _search_terms(namespace_id: int, search: str) -> tuple[str, str]:
    """The search as a prefix tsquery over the folded value's words (the same folding and
    lexemes as ``version_value_tsv``), restricted to the namespace, and its folded text (a
    match must also contain it). One statement."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT (SELECT string_agg(quote_literal(lexeme) || ':*', ' & ')"
            " FROM unnest(to_tsvector('simple'::regconfig, pmem_fold(%s)))), pmem_fold(%s)",
            [search, search])
        row = cur.fetchone()
    if row is None or not row[0]:
        raise BadParameter("search", "search for at least one letter or digit")
    return f"{row[0]} & {_ns_lexeme(namespace_id)}", str(row[1])


def _ns_lexeme(namespace_id: int) -> str:
    return f"'ns:{int(namespace_id)}'"


def _entry(row: tuple[Any, ...]) -> Entry:
    return Entry(int(row[0]), int(row[1]), row[2], str(row[3]), row[4], row[5], row[6], row[7],
                 stored_json(row[8]), row[9])


@dataclass(frozen=True)
class HistoryPage:
    """A page of a key's history, newest first, with ``total`` (the versions, or a search's
    matches), ``next`` (the cursor of the next, older, page) and ``newer`` (the cursor of the
    page before this one; None for the first page and for a search, whose pages do not sit at
    fixed ordinals)."""

    entries: list[Entry]
    total: int
    next: str | None
    newer: str | None


def history_page(cell: Cell, *, before: str | None = None, limit: int = HISTORY_DEFAULT,
                 as_of: datetime | None = None, search: str | None = None) -> HistoryPage:
    """A page of the key's history, newest first, the head included. ``before`` is a cursor
    from an earlier page of this key (else :class:`~memory.domain.BadParameter` naming
    ``before``). As of T, only versions created by T, with the statuses they had then. With
    ``search``, the versions whose folded value contains the search and whose words begin
    with its words; ``total`` counts the matches (up to SEARCH_COUNT_CAP). Statements: one for
    the page, plus one as of T (the count), plus two with a search (its terms and its count);
    never a scan of the history."""
    limit = max(1, min(limit, HISTORY_MAX))
    total = count_as_of(cell, as_of)
    hi = total if before is None else min(total, parse_cursor(cell, before) - 1)
    params: dict[str, Any] = {"cell": cell.pk, "lo": 1, "hi": hi, "limit": limit + 1, "t": as_of}
    if search:
        params["query"], params["folded"] = _search_terms(cell.namespace_id, search)
    with connection.cursor() as cur:
        cur.execute(_entries_sql(as_of, bool(search)), params)
        rows = [_entry(r) for r in cur.fetchall()]
        if search:
            cur.execute(f"SELECT count(*) FROM ({_entries_sql(None, True)}) AS x",
                        {**params, "hi": total, "limit": SEARCH_COUNT_CAP})
            total = int(cur.fetchone()[0])
    more = len(rows) > limit
    rows = rows[:limit]
    # Keysets on the per-key ordinal make the page before this one computable.
    newer = None
    if rows and not search and rows[0].ordinal + limit < total:
        newer = cursor_for(cell, rows[0].ordinal + limit + 1)
    return HistoryPage(rows, total, cursor_for(cell, rows[-1].ordinal) if more and rows else None,
                       newer)


def first_pages(cells: list[Cell], limit: int) -> dict[int, list[Entry]]:
    """The newest ``limit`` history entries of each of ``cells`` (a page of the cell list):
    one statement whatever the number of cells or the length of their histories."""
    out: dict[int, list[Entry]] = {c.pk: [] for c in cells}
    if not cells:
        return out
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT v.cell_id, {_NOW_COLUMNS} FROM unnest(%s::bigint[]) AS c(id)"
            " CROSS JOIN LATERAL (SELECT * FROM memory_version x WHERE x.cell_id = c.id"
            " ORDER BY x.ordinal DESC LIMIT %s) AS v ORDER BY v.cell_id, v.ordinal DESC",
            [list(out), limit])
        for row in cur.fetchall():
            out[row[0]].append(_entry(row[1:]))
    return out


def version_status_at(version_id: int, as_of: datetime) -> str | None:
    """A version's status at ``as_of``: its last span that began by then (one probe)."""
    return (VersionSpan.objects.filter(version_id=version_id, since__lte=as_of)
            .order_by("-since", "-id").values_list("status", flat=True).first())
