"""A window of a key's provenance graph (SPEC §2, §10): versions, the observations and
operations behind them, tombstones and typed edges, now or as of a past time. Every node is
shaped here, once; the API renders the window, the explorer adds its own links to it.

A window costs the same whatever the length of the history or the versions' support: its
versions are an ordinal range (``version_ordinal_unique``) plus the head and the open
alternatives, and per version only the newest PER_VERSION supporting observations and
operations are read.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connection

from memory.domain import OPEN_STATUSES, BadParameter
from memory.models import Cell, Version

from .history import SPAN_AT, alternatives, count_as_of, head_as_of
from .shapes import RAW_OUTPUT_CHARS, evidence_heads, stored_json

#: Default and largest graph window, in versions (CONTRACT).
WINDOW_DEFAULT = 40
WINDOW_MAX = 500
#: Evidence and operations a graph window shows per version (the newest; counts say the rest).
PER_VERSION = 5
#: The sides a window can extend to: the versions just older or newer than a drawn one.
SIDES = ("older", "newer")


_WINDOW_SQL = """
SELECT v.id, v.ordinal, v.value, {status}, v.valid_from, {valid_to}, v.support, v.created_at,
       v.supersedes_id, v.alternative_of_id, v.restores_id, v.metadata, v.expires_at
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
        status="sp.status", lateral=SPAN_AT,
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
        raise BadParameter("around", "a version of this key" + (
            " that existed at as_of" if as_of is not None else ""))
    return int(row[0]), head


def _bounds(anchor: int, total: int, limit: int) -> tuple[int, int]:
    """The ordinals ``[lo, hi]`` of a window of ``limit`` versions around ``anchor``: centred,
    shifted to fit ``[1, total]`` (the newest ``limit`` when the anchor is the newest)."""
    hi = min(total, anchor + limit // 2)
    lo = max(1, hi - limit + 1)
    return lo, min(total, lo + limit - 1)


def graph_window(cell: Cell, *, around: int | None = None, limit: int = WINDOW_DEFAULT,
                 as_of: datetime | None = None, side: str | None = None) -> dict[str, Any]:
    """The provenance graph of a window of the key's versions (``limit``, default 40, around
    the version ``around`` or the head), now or as of T, with the head and every open
    alternative even outside it; per version its newest PER_VERSION supporting observations
    and operations, and its tombstones; ``window: {versions, older, newer, first, last,
    total}`` counts what lies outside. Statements: at most nine (anchor, alternatives,
    versions, edges, operations, tombstones, observations), whatever the history's length
    or the versions' support. With ``side`` (:data:`SIDES`), the ``limit`` versions just
    older or newer than ``around`` instead (the edge of what is drawn): three statements
    more."""
    limit = max(1, min(limit, WINDOW_MAX))
    if side is not None and around is not None:
        around = _beside(cell, around, side, limit, as_of)
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
    more_nodes, more_edges = _attached(shown, {r[0]: r[1] for r in rows}, as_of)
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
         alternative_of, restores, metadata, expires_at) in rows:
        nodes.append({"id": f"v{vid}", "kind": "version", "label": value, "status": status,
                      "version": vid, "ordinal": ordinal, "metadata": stored_json(metadata),
                      "expires_at": expires_at,
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


def _attached(shown: list[int], ordinals: dict[int, int], as_of: datetime | None
              ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Observations, operations and tombstones of the shown versions (bounded per version;
    an operation names its version's ``ordinal``, from ``ordinals``). Four statements."""
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
               "version": o[6], "ordinal": ordinals.get(o[6]), "created_at": o[7],
               "evidence": o[8], "raw_output": o[9],
               "raw_output_chars": o[10], "raw_output_truncated": o[10] > RAW_OUTPUT_CHARS}
              for o in ops]
    for tid, version_id, operation_id, created_at in tombs:
        nodes.append({"id": f"t{tid}", "kind": "tombstone", "label": "revoked",
                      "operation": operation_id, "created_at": created_at})
        edges.append({"source": f"t{tid}", "target": f"v{version_id}", "type": "revokes"})
    return nodes, edges


def _evidence_nodes(ids: set[int]) -> list[dict[str, Any]]:
    """Observations as graph nodes (:func:`~memory.selectors.shapes.evidence_heads`): the head
    of the text, never facts or vectors. One statement."""
    return [{"id": f"e{e['id']}", "kind": "evidence", "label": f"#{e['seq']}",
             "observation": e["id"], **{k: v for k, v in e.items() if k != "id"}}
            for e in evidence_heads(ids).values()]


def _ordinal_id(cell: Cell, ordinal: int) -> int | None:
    return (Version.objects.filter(cell=cell, ordinal=ordinal).values_list("id", flat=True)
            .first())


def _beside(cell: Cell, around: int, side: str, limit: int, as_of: datetime | None
            ) -> int | None:
    """The version a window must centre on to hold the ``limit`` versions just ``side`` of
    ``around`` (windows are centred, so the centre sits where the window ends, or starts, next
    to ``around``). Two index probes and the count."""
    edge = (Version.objects.filter(cell=cell, pk=around).values_list("ordinal", flat=True)
            .first())
    if edge is None:
        raise BadParameter("around", "a version of this key")
    total = count_as_of(cell, as_of)
    target = edge - 1 - limit // 2 if side == "older" else edge + limit - limit // 2
    return _ordinal_id(cell, max(1, min(total, target))) if total else None
