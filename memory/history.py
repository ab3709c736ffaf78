"""Bounded reads of long histories and memory as of a past time (SPEC §9, §10; decisions 50-53).

Everything here costs the same number of statements, with the same plans, whether a key holds
a hundred versions or a million: pages and windows are keysets on ``(cell, ordinal)``
(``version_ordinal_unique``), totals come from ``Cell.version_count`` (or, as of T, from the
last version created by T: ``version_cell_created_idx``), and "as of T" reads the status spans
the commit keeps (:class:`memory.models.VersionSpan`): a version's status at T is its last span
that began by T (``span_version_idx``), the head at T the last head-status span that began by T
if it is still open at T (``span_head_idx``), the alternatives at T those whose span covers T
and began since the contest did (``span_alternative_idx``). Nothing here replays operations.

Plain functions for the API and the explorer; each docstring states its statement count.
``as_of`` is an aware datetime (the callers parse and refuse zone-less ones).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection

from memory.domain import HEAD_STATUSES, OPEN_STATUSES, Status, vocabulary
from memory.models import Cell, Namespace

#: Default and largest page of history (CONTRACT).
HISTORY_DEFAULT = 50
HISTORY_MAX = 1000
#: Default and largest graph window, in versions (CONTRACT).
WINDOW_DEFAULT = 40
WINDOW_MAX = 500
#: A value search counts its matches up to this many (its ``total`` is then a lower bound).
SEARCH_COUNT_CAP = 10_000
#: An as-of head's support is counted up to this many edges.
SUPPORT_COUNT_CAP = 100_000
#: Evidence and operations a graph window shows per version (the newest; counts say the rest).
PER_VERSION = 5
#: Characters of an observation's text a graph node carries (as memory.selectors does).
TEXT_CHARS = 500
RAW_OUTPUT_CHARS = 2000

_HEAD = tuple(str(s) for s in HEAD_STATUSES)


class HistoryError(ValueError):
    """A reader's parameter that names something it cannot (400 naming ``field``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


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
        raise HistoryError(field, "not a history cursor (take it from history_next or next)")
    if int(cell_part) != cell.pk:
        raise HistoryError(field, "this cursor belongs to another key's history")
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
SELECT v.id, v.value, v.support, v.valid_from, v.ordinal FROM memory_versionspan s
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
            cur.execute("SELECT id, value, support, valid_from, ordinal FROM memory_version"
                        " WHERE cell_id = %s AND status = %s ORDER BY id",
                        [cell.pk, str(Status.ALTERNATIVE)])
        else:
            cur.execute(_ALTERNATIVES_AT_SQL, {"cell": cell.pk, "t": as_of})
        rows = cur.fetchall()
    return [{"version": r[0], "value": r[1], "support": r[2] if as_of is None else None,
             "valid_from": r[3], "ordinal": r[4]} for r in rows]


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
    NULL::int, v.created_at"""
_SPAN_AT = """
  CROSS JOIN LATERAL (SELECT s.status, s.since FROM memory_versionspan s
                       WHERE s.version_id = v.id AND s.since <= %(t)s
                       ORDER BY s.since DESC, s.id DESC LIMIT 1) AS sp"""
_NOW_COLUMNS = "v.id, v.ordinal, v.value, v.status, v.valid_from, v.valid_to, v.support, v.created_at"


def _entries_sql(as_of: datetime | None, search: bool, descending: bool = True) -> str:
    columns = _AS_OF_COLUMNS if as_of is not None else _NOW_COLUMNS
    lateral = _SPAN_AT if as_of is not None else ""
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
        raise HistoryError("search", "search for at least one letter or digit")
    return f"{row[0]} & {_ns_lexeme(namespace_id)}", str(row[1])


def _ns_lexeme(namespace_id: int) -> str:
    return f"'ns:{int(namespace_id)}'"


def _entry(row: tuple[Any, ...]) -> Entry:
    return Entry(int(row[0]), int(row[1]), row[2], str(row[3]), row[4], row[5], row[6], row[7])


def history_page(cell: Cell, *, before: str | None = None, limit: int = HISTORY_DEFAULT,
                 as_of: datetime | None = None, search: str | None = None
                 ) -> tuple[list[Entry], str | None, int]:
    """A page of the key's history, newest first, the head included: ``(entries, next cursor
    or None, total)``. ``before`` is a cursor from an earlier page of this key (else
    :class:`HistoryError` naming ``before``). As of T, only versions created by T, with the
    statuses they had then. With ``search``, the versions whose folded value contains the
    search and whose words begin with its words; ``total`` counts the matches (up to
    SEARCH_COUNT_CAP). Statements: one for the page, plus one as of T (the count), plus two
    with a search (its terms and its count); never a scan of the history."""
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
    return rows, cursor_for(cell, rows[-1].ordinal) if more and rows else None, total


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


# --- the cell, now or as of T -------------------------------------------------------------------


@dataclass
class CellAsOf:
    """A cell now or as it was at ``as_of``: head, status, alternatives and a first page of
    history (at most ``limit`` entries, with the total and the cursor of the next page)."""

    cell: Cell
    key: str
    value: str | None
    status: str  # a CellStatus
    version: int | None
    support: int
    alternatives: list[dict[str, Any]] = field(default_factory=list)
    history: list[Entry] = field(default_factory=list)
    history_total: int = 0
    history_next: str | None = None
    as_of: datetime | None = None

    @property
    def existed(self) -> bool:
        """False when the key had no version yet at ``as_of`` (the empty memory)."""
        return self.history_total > 0


def cell_state(cell: Cell, *, as_of: datetime | None = None,
               history: int = HISTORY_DEFAULT) -> CellAsOf:
    """The cell now (its head row is ``cell.head``) or as of T. Statements now: head (one,
    unless ``cell.head`` is loaded), alternatives (one), the history page (one). As of T: the
    count, the head, its value and support, the alternatives, the page: six. Never more,
    whatever the history's length."""
    if as_of is None:
        head = cell.head
        head_row = (head.id, str(head.status), head.value, head.support) if head else None
    else:
        found = head_as_of(cell, as_of)
        head_row = None
        if found is not None:
            with connection.cursor() as cur:
                cur.execute("SELECT value FROM memory_version WHERE id = %s", [found[0]])
                value = cur.fetchone()[0]
            head_row = (found[0], found[1], value, support_as_of(found[0], as_of))
    if history > 0:
        entries, nxt, total = history_page(cell, limit=history, as_of=as_of)
    else:  # the counts alone: the first page starts at the newest version
        total = count_as_of(cell, as_of)
        entries, nxt = [], cursor_for(cell, total + 1) if total else None
    contested = head_row is not None and head_row[1] == Status.CONTESTED
    alts = alternatives(cell, as_of) if contested else []
    return CellAsOf(
        cell=cell, key=cell.key, value=head_row[2] if head_row else None,
        status=vocabulary.cell_status(head_row[1] if head_row else None),
        version=head_row[0] if head_row else None, support=head_row[3] if head_row else 0,
        alternatives=alts, history=entries, history_total=total, history_next=nxt, as_of=as_of)


def cell_as_of(namespace: Namespace, key: str, as_of: datetime | None,
               history: int = HISTORY_DEFAULT) -> CellAsOf | None:
    """The cell a key names (canonical, else an alias) now or as of T; None when there is no
    such key now (an erased key has no past: SPEC §6). One statement to find the cell, then
    :func:`cell_state`."""
    from memory.domain import normalize_key

    norm = normalize_key(key)
    cell = (Cell.objects.filter(namespace=namespace, key=norm).select_related("head")
            .defer("embedding", "key_embedding", "embedded_text").first())
    if cell is None:
        cell = (Cell.objects.filter(namespace=namespace, aliases__alias=norm)
                .select_related("head").defer("embedding", "key_embedding", "embedded_text")
                .first())
    if cell is None:
        return None
    return cell_state(cell, as_of=as_of, history=history)


# --- moving through time -----------------------------------------------------------------------


def version_at(cell: Cell, when: datetime) -> int | None:
    """The version the key's history holds at ``when``: the last one created by then, else the
    first one (a jump to a date). One statement on ``version_cell_created_idx``."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT COALESCE((SELECT id FROM memory_version WHERE cell_id = %(cell)s"
            " AND created_at <= %(t)s ORDER BY created_at DESC, ordinal DESC LIMIT 1),"
            " (SELECT id FROM memory_version WHERE cell_id = %(cell)s AND ordinal = 1))",
            {"cell": cell.pk, "t": when})
        row = cur.fetchone()
    return int(row[0]) if row and row[0] is not None else None


# --- the graph window -----------------------------------------------------------------------

_WINDOW_SQL = """
SELECT v.id, v.ordinal, v.value, {status}, v.valid_from, {valid_to}, v.support, v.created_at,
       v.supersedes_id, v.alternative_of_id, v.restores_id
  FROM memory_version v{lateral}
 WHERE v.cell_id = %(cell)s AND ((v.ordinal >= %(lo)s AND v.ordinal <= %(hi)s)
       OR v.id = ANY(%(extra)s))
 ORDER BY v.ordinal
"""


def _window_sql(as_of: datetime | None) -> str:
    if as_of is None:
        return _WINDOW_SQL.format(status="v.status", valid_to="v.valid_to", lateral="")
    open_ = ", ".join(f"'{s}'" for s in sorted(OPEN_STATUSES))
    return _WINDOW_SQL.format(
        status="sp.status", lateral=_SPAN_AT,
        valid_to=(f"CASE WHEN sp.status IN ({open_}) THEN NULL"
                  " ELSE LEAST(COALESCE(v.valid_to, sp.since), sp.since) END"))


def _anchor(cell: Cell, around: int | None, as_of: datetime | None, total: int
            ) -> tuple[int, int | None]:
    """The ordinal the window centres on and the head's id (now or at T). One statement
    (two as of T without ``around``: the head, then its ordinal)."""
    head = (cell.head_id if as_of is None
            else (found[0] if (found := head_as_of(cell, as_of)) else None))
    target = around if around is not None else head
    if target is None:
        return total, head
    with connection.cursor() as cur:
        cur.execute("SELECT ordinal, cell_id FROM memory_version WHERE id = %s", [target])
        row = cur.fetchone()
    if row is None or row[1] != cell.pk or (around is not None and row[0] > total):
        raise HistoryError("around", "a version of this key" + (
            " that existed at as_of" if as_of is not None else ""))
    return int(row[0]), head


def _bounds(anchor: int, total: int, limit: int) -> tuple[int, int]:
    """The ordinals ``[lo, hi]`` of a window of ``limit`` versions around ``anchor``: centred,
    shifted to fit ``[1, total]`` (the newest ``limit`` when the anchor is the newest)."""
    hi = min(total, anchor + limit // 2)
    lo = max(1, hi - limit + 1)
    return lo, min(total, lo + limit - 1)


def graph_window(cell: Cell, *, around: int | None = None, limit: int = WINDOW_DEFAULT,
                 as_of: datetime | None = None) -> dict[str, Any]:
    """The provenance graph of a window of the key's versions (``limit``, default 40, around
    the version ``around`` or the head), now or as of T, with the head and every open
    alternative even outside it; per version its newest PER_VERSION supporting observations
    and operations, and its tombstones; ``window: {versions, older, newer, first, last,
    total}`` counts what lies outside. Statements: at most nine (anchor, alternatives,
    versions, edges, operations, tombstones, observations), whatever the history's length
    or the versions' support."""
    limit = max(1, min(limit, WINDOW_MAX))
    total = count_as_of(cell, as_of)
    anchor, head = _anchor(cell, around, as_of, total)
    lo, hi = _bounds(anchor, total, limit) if total else (1, 0)
    extra = [a["version"] for a in alternatives(cell, as_of)] if head is not None else []
    extra += [head] if head is not None else []
    with connection.cursor() as cur:
        cur.execute(_window_sql(as_of), {"cell": cell.pk, "lo": lo, "hi": hi, "extra": extra,
                                         "t": as_of})
        rows = cur.fetchall()
    nodes, edges = _version_nodes(rows, lo, hi, as_of)
    shown = [r[0] for r in rows]
    more_nodes, more_edges = _attached(shown, as_of)
    return {"key": cell.key, "nodes": nodes + more_nodes, "edges": edges + more_edges,
            "window": {"versions": sum(1 for r in rows if lo <= r[1] <= hi), "older": lo - 1
                       if total else 0, "newer": total - hi if total else 0,
                       "first": lo if total else None, "last": hi if total else None,
                       "total": total, "around": around if around is not None else head},
            "head": head, "as_of": as_of}


def _version_nodes(rows: list[tuple[Any, ...]], lo: int, hi: int, as_of: datetime | None
                   ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    shown = {r[0] for r in rows}
    nodes: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []
    for (vid, ordinal, value, status, valid_from, valid_to, support, created_at, supersedes,
         alternative_of, restores) in rows:
        nodes.append({"id": f"v{vid}", "kind": "version", "label": value, "status": status,
                      "version": vid, "ordinal": ordinal,
                      "support": support if as_of is None else None, "valid_from": valid_from,
                      "valid_to": valid_to, "created_at": created_at,
                      "in_window": lo <= ordinal <= hi})
        if supersedes in shown:
            edges.append({"source": f"v{vid}", "target": f"v{supersedes}", "type": "supersedes"})
        if alternative_of in shown:
            edges.append({"source": f"v{vid}", "target": f"v{alternative_of}",
                          "type": "alternative_of"})
        if restores in shown:  # SPEC §3 restore: the undo points at the mistake it undid
            edges.append({"source": f"v{vid}", "target": f"v{restores}", "type": "restores"})
    return nodes, edges


_ATTACHED_SQL = """
SELECT e.version_id, e.evidence_id, e.operation_id FROM unnest(%(ids)s::bigint[]) AS v(id)
 CROSS JOIN LATERAL (SELECT s.* FROM memory_supportedge s
                      WHERE s.version_id = v.id AND s.evidence_id IS NOT NULL
                        AND (SELECT o.created_at FROM memory_operation o
                              WHERE o.id = s.operation_id) <= %(t)s
                      ORDER BY s.id DESC LIMIT %(per)s) AS e
"""
_OPERATIONS_SQL = """
SELECT o.id, o.type, o.requested, o.actor, o.reason, o.seq, o.version_id, o.created_at,
       o.evidence_id, left(o.raw_output, %(raw)s), length(o.raw_output)
  FROM unnest(%(ids)s::bigint[]) AS v(id)
 CROSS JOIN LATERAL (SELECT x.* FROM memory_operation x WHERE x.version_id = v.id
                        AND x.created_at <= %(t)s ORDER BY x.id DESC LIMIT %(per)s) AS o
 ORDER BY o.id
"""


def _attached(shown: list[int], as_of: datetime | None
              ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Observations, operations and tombstones of the shown versions (bounded per version).
    Four statements."""
    params = {"ids": shown, "t": as_of if as_of is not None else "infinity",
              "per": PER_VERSION, "raw": RAW_OUTPUT_CHARS}
    with connection.cursor() as cur:
        cur.execute(_ATTACHED_SQL, params)
        supports = cur.fetchall()
        cur.execute(_OPERATIONS_SQL, params)
        ops = cur.fetchall()
        cur.execute("SELECT t.id, t.version_id, t.operation_id, t.created_at"
                    " FROM memory_tombstone t WHERE t.version_id = ANY(%(ids)s)"
                    " AND t.created_at <= %(t)s ORDER BY t.id", params)
        tombs = cur.fetchall()
    nodes: list[dict[str, Any]] = []
    edges = [{"source": f"v{v}", "target": f"e{e}", "type": "supported_by"}
             for v, e, _ in supports]
    evidence_ids = {e for _, e, _ in supports} | {o[8] for o in ops if o[8] is not None}
    nodes += _evidence_nodes(evidence_ids)
    nodes += [{"id": f"o{o[0]}", "kind": "operation", "label": o[1], "op": o[1],
               "requested": o[2], "actor": o[3], "reason": o[4], "seq": o[5],
               "version": o[6], "created_at": o[7], "evidence": o[8], "raw_output": o[9],
               "raw_output_chars": o[10], "raw_output_truncated": o[10] > RAW_OUTPUT_CHARS}
              for o in ops]
    for tid, version_id, operation_id, created_at in tombs:
        nodes.append({"id": f"t{tid}", "kind": "tombstone", "label": "revoked",
                      "operation": operation_id, "created_at": created_at})
        edges.append({"source": f"t{tid}", "target": f"v{version_id}", "type": "revokes"})
    return nodes, edges


def _evidence_nodes(ids: set[int]) -> list[dict[str, Any]]:
    """Observations as graph nodes: the head of the text, never facts or vectors. One
    statement."""
    if not ids:
        return []
    with connection.cursor() as cur:
        cur.execute("SELECT id, seq, source, received_at, left(text, %s), length(text)"
                    " FROM memory_evidence WHERE id = ANY(%s) ORDER BY seq",
                    [TEXT_CHARS, sorted(ids)])
        rows = cur.fetchall()
    return [{"id": f"e{i}", "kind": "evidence", "label": f"#{seq}", "observation": i,
             "seq": seq, "source": source, "received_at": received, "text": text,
             "text_chars": chars, "text_truncated": chars > TEXT_CHARS}
            for i, seq, source, received, text, chars in rows]


# --- the timeline -------------------------------------------------------------------------------

# The stretch ends of a timeline: for each of ``buckets`` equal stretches of commit time
# between the first version and the last (by T), the last ordinal created by its end and that
# version's id — two index probes per stretch (version_cell_created_idx, then the ordinal).
_BOUNDARIES_SQL = """
WITH ends AS (
    SELECT (SELECT created_at FROM memory_version WHERE cell_id = %(cell)s AND ordinal = 1) AS lo,
           (SELECT created_at FROM memory_version WHERE cell_id = %(cell)s
             AND ordinal = %(n)s) AS hi
)
SELECT b, ends.lo + (ends.hi - ends.lo) * b / %(buckets)s AS until, x.ordinal, x.id, ends.lo
  FROM ends, generate_series(1, %(buckets)s) AS b
 CROSS JOIN LATERAL (
     SELECT v.ordinal, v.id FROM memory_version v
      WHERE v.cell_id = %(cell)s AND v.created_at = (
            SELECT max(w.created_at) FROM memory_version w WHERE w.cell_id = %(cell)s
               AND w.created_at <= ends.lo + (ends.hi - ends.lo) * b / %(buckets)s)
      ORDER BY v.ordinal DESC LIMIT 1) AS x
 ORDER BY b
"""
# Every version whose status (now, or at T) is not ``superseded``: the head, the alternatives
# and the retracted ones (revoked and contradicted are for good, SPEC §3/§4), through
# version_cell_status_idx; as of T, with the head and alternatives at T, each with its status
# then. Every other version is superseded — counted, never read.
_RARE_SQL = """
SELECT v.ordinal, {status} FROM (
    SELECT x.id, x.ordinal, x.status FROM memory_version x
     WHERE x.cell_id = %(cell)s AND x.status IN ({rare})
       AND x.ordinal + 0 <= %(n)s  -- a filter, not a range: the status index serves this
    UNION
    SELECT x.id, x.ordinal, x.status FROM memory_version x WHERE x.id = ANY(%(extra)s)
) AS v{lateral}
"""


def status_timeline(cell: Cell, *, buckets: int = 60, as_of: datetime | None = None
                    ) -> dict[str, Any]:
    """The whole history (as of T: by T) in ``buckets`` equal stretches of commit time: per
    stretch, how many versions were created in it by status (now, or the status they had at
    T), and its first and last ordinal and version (to jump a window there). Statements: two
    now, five as of T; the work follows ``buckets`` and the versions that are not superseded
    (head, alternatives, retracted ones), never the length of the history."""
    buckets = max(1, min(buckets, 500))
    total = count_as_of(cell, as_of)
    out = {"key": cell.key, "total": total, "start": None, "end": None, "buckets": buckets,
           "statuses": [str(s) for s in Status], "as_of": as_of, "bins": []}
    if total == 0:
        return out
    with connection.cursor() as cur:
        cur.execute(_BOUNDARIES_SQL, {"cell": cell.pk, "n": total, "buckets": buckets})
        ends = cur.fetchall()
    rare = _rare_statuses(cell, total, as_of)
    bins, previous = [], 0
    for b, until, last_ordinal, last_version, start in ends:
        if last_ordinal <= previous:
            continue  # nothing was created in this stretch
        counts: dict[str, int] = {}
        for ordinal, status in rare:
            if previous < ordinal <= last_ordinal:
                counts[status] = counts.get(status, 0) + 1
        plain = last_ordinal - previous - sum(counts.values())
        if plain:
            counts[str(Status.SUPERSEDED)] = counts.get(str(Status.SUPERSEDED), 0) + plain
        bins.append({"bucket": b, "counts": counts, "first_ordinal": previous + 1,
                     "last_ordinal": last_ordinal, "last_version": last_version,
                     "to": until, "from": start + (until - start) * (b - 1) / b})
        previous = last_ordinal
    _first_versions(cell, bins)
    out.update(start=ends[0][4], end=ends[-1][1], bins=bins)
    return out


def _rare_statuses(cell: Cell, total: int, as_of: datetime | None) -> list[tuple[int, str]]:
    """(ordinal, status) of the versions not superseded now, or at T. One statement now,
    three as of T."""
    rare = ", ".join(f"'{s}'" for s in sorted(set(Status) - {Status.SUPERSEDED}))
    extra: list[int] = []
    if as_of is not None:
        head = head_as_of(cell, as_of)
        extra = [a["version"] for a in alternatives(cell, as_of)] if head else []
        extra += [head[0]] if head else []
    sql = _RARE_SQL.format(status="v.status" if as_of is None else "sp.status",
                           lateral="" if as_of is None else _SPAN_AT, rare=rare)
    with connection.cursor() as cur:
        cur.execute(sql, {"cell": cell.pk, "n": total, "extra": extra, "t": as_of})
        return [(int(o), str(st)) for o, st in cur.fetchall()]


def _first_versions(cell: Cell, bins: list[dict[str, Any]]) -> None:
    """Each stretch's first version id (one statement on the ordinal index)."""
    with connection.cursor() as cur:
        cur.execute("SELECT o.n, (SELECT v.id FROM memory_version v WHERE v.cell_id = %s"
                    " AND v.ordinal = o.n) FROM unnest(%s::int[]) AS o(n)",
                    [cell.pk, [b["first_ordinal"] for b in bins]])
        ids = dict(cur.fetchall())
    for b in bins:
        b["first_version"] = ids.get(b["first_ordinal"])


# --- the frontier as of T ---------------------------------------------------------------------

_FRONTIER_AT_SQL = f"""
SELECT c.id, c.key, h.version_id, h.status, hv.value, n.n FROM memory_cell c
 CROSS JOIN LATERAL (
     SELECT max(x.ordinal) AS n FROM memory_version x WHERE x.cell_id = c.id
        AND x.created_at = (SELECT max(y.created_at) FROM memory_version y
                             WHERE y.cell_id = c.id AND y.created_at <= %(t)s)) AS n
 LEFT JOIN LATERAL (
     SELECT s.version_id, s.status, s.until FROM memory_versionspan s
      WHERE s.cell_id = c.id AND s.status IN ('{_HEAD[0]}', '{_HEAD[1]}') AND s.since <= %(t)s
      ORDER BY s.since DESC, s.id DESC LIMIT 1) AS h0 ON true
 LEFT JOIN LATERAL (
     SELECT h0.version_id, h0.status WHERE h0.until IS NULL OR h0.until > %(t)s) AS h ON true
 LEFT JOIN memory_version hv ON hv.id = h.version_id
 WHERE c.namespace_id = %(ns)s AND c.key > %(after)s AND n.n IS NOT NULL{{filters}}
 ORDER BY c.key LIMIT %(limit)s
"""


@dataclass(frozen=True)
class FrontierRow:
    cell_id: int
    key: str
    version: int | None
    status: str  # a CellStatus
    value: str | None
    history_total: int

    def as_dict(self) -> dict[str, Any]:
        return {"key": self.key, "value": self.value, "status": self.status,
                "version": self.version, "support": None, "history_total": self.history_total}


def frontier_as_of(namespace: Namespace, as_of: datetime, *, after: str = "",
                   limit: int = 50, status: str | None = None, search: str | None = None,
                   metadata: dict[str, Any] | None = None
                   ) -> tuple[list[FrontierRow], str | None]:
    """The cells as they were at ``as_of``, by key after ``after``: ``(rows, next after)``.
    A key is listed if it had a version by T (an erased key has none: SPEC §6); before the
    namespace's first commit the answer is empty. ``status`` filters by the cell's status at
    T, ``search`` by key or value at T (contains, case-insensitive), ``metadata`` by the
    head at T's metadata (each entry equal). One statement; it walks
    the keys in order until the page is full, each with index probes only."""
    filters = ""
    params: dict[str, Any] = {"t": as_of, "ns": namespace.pk, "after": after,
                              "limit": limit + 1}
    if status == vocabulary.CellStatus.EMPTY:
        filters += " AND h.version_id IS NULL"
    elif status in (vocabulary.CellStatus.ACTIVE, vocabulary.CellStatus.CONTESTED):
        filters += " AND h.status = %(status)s"
        params["status"] = status
    if search:
        filters += " AND (c.key ILIKE %(like)s OR hv.value ILIKE %(like)s)"
        params["like"] = "%" + search.replace("\\", "\\\\").replace("%", "\\%").replace(
            "_", "\\_") + "%"
    if metadata:
        filters += " AND hv.metadata @> %(metadata)s::jsonb"
        params["metadata"] = json.dumps(metadata)
    with connection.cursor() as cur:
        cur.execute(_FRONTIER_AT_SQL.format(filters=filters), params)
        rows = cur.fetchall()
    out = [FrontierRow(r[0], r[1], r[2], vocabulary.cell_status(r[3]), r[4], int(r[5]))
           for r in rows[:limit]]
    return out, (out[-1].key if len(rows) > limit and out else None)
