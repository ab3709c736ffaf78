"""The explorer's one door to ``memory.history`` (bounded history reads and time travel):
the cell page and its fragments call these, shaped as the templates and scripts need them.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Max, Min

from explorer.cell_reads import BadParameter
from memory import history as mh
from memory.domain import Status
from memory.models import Cell, Namespace, Version, VersionSpan


@dataclass(frozen=True)
class CellState:
    value: str | None
    status: str
    version: int | None
    ordinal: int | None
    support: int
    total: int
    alternatives: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class HistoryPage:
    entries: list[dict[str, Any]]
    total: int
    next: str | None  # the cursor of the next (older) page
    newer: str | None  # the cursor of the page before (newer); None: the first page


def cell_state(cell: Cell, *, as_of: datetime | None) -> CellState:
    """The head (with its per-key ordinal), alternatives and total, now or as of T."""
    state = mh.cell_state(cell, as_of=as_of, history=1)
    ordinal = None
    if state.version is not None:
        first = state.history[0] if state.history else None
        ordinal = (first.ordinal if first is not None and first.version == state.version else
                   Version.objects.filter(pk=state.version).values_list("ordinal", flat=True)
                   .first())
    return CellState(state.value, state.status, state.version, ordinal, state.support,
                     state.history_total, state.alternatives)


def version_status_at(version_id: int, as_of: datetime) -> str | None:
    """A version's status at ``as_of``: its last span that began by then (one probe)."""
    return (VersionSpan.objects.filter(version_id=version_id, since__lte=as_of)
            .order_by("-since", "-id").values_list("status", flat=True).first())


def history_page(cell: Cell, *, before: str | None, limit: int, as_of: datetime | None,
                 search: str | None) -> HistoryPage:
    """A page of history; ``newer`` is the cursor of the page before it (keysets on the
    per-key ordinal make it computable without a search), None when that is the first."""
    try:
        entries, nxt, total = mh.history_page(cell, before=before, limit=limit, as_of=as_of,
                                              search=search)
    except mh.HistoryError as exc:
        raise BadParameter("q" if exc.field == "search" else exc.field, str(exc)) from None
    newer = None
    if entries and not search and entries[0].ordinal + limit < total:
        newer = mh.cursor_for(cell, entries[0].ordinal + limit + 1)
    return HistoryPage([e.as_dict() for e in entries], total, nxt, newer)


def _ordinal_id(cell: Cell, ordinal: int) -> int | None:
    return (Version.objects.filter(cell=cell, ordinal=ordinal).values_list("id", flat=True)
            .first())


def graph_window(cell: Cell, *, around: int | None, limit: int, side: str | None,
                 as_of: datetime | None) -> dict[str, Any]:
    """A window of ``limit`` versions around ``around`` (default the head), or with ``side``
    the ``limit`` versions just older / newer than ``around`` (the edge of what is drawn):
    memory.history centres its windows, so the side's window is centred where it must be to
    end (or start) next to ``around``. Two more index probes than the centred window."""
    if side and around is not None:
        edge = (Version.objects.filter(cell=cell, pk=around).values_list("ordinal", flat=True)
                .first())
        if edge is None:
            raise BadParameter("around", "a version of this key")
        total = mh.count_as_of(cell, as_of)
        target = (edge - 1 - limit // 2 if side == "older" else edge + limit - limit // 2)
        target = max(1, min(total, target))
        around = _ordinal_id(cell, target) if total else None
    try:
        return mh.graph_window(cell, around=around, limit=limit, as_of=as_of)
    except mh.HistoryError as exc:
        raise BadParameter(exc.field, str(exc)) from None


#: Versions whose status is not ``superseded`` that the present timeline places one by one;
#: a key with more (a history of contests) is counted by memory.history's aggregate instead.
TIMELINE_MARKED_MAX = 20_000

# The ordinal reached at each of the bucket edges (the newest version created by then; ordinals
# follow commit order) and that version's id: two index probes per edge on
# version_cell_created_idx and one on version_ordinal_unique, whatever the history's length.
_EDGES_SQL = """
SELECT e.i, r.n, (SELECT v.id FROM memory_version v WHERE v.cell_id = %(cell)s
                                                      AND v.ordinal = r.n)
  FROM unnest(%(edges)s::timestamptz[]) WITH ORDINALITY AS e(t, i)
 CROSS JOIN LATERAL (
     SELECT max(x.ordinal) AS n FROM memory_version x WHERE x.cell_id = %(cell)s
        AND x.created_at = (SELECT max(y.created_at) FROM memory_version y
                             WHERE y.cell_id = %(cell)s AND y.created_at <= e.t)) AS r
 ORDER BY e.i
"""


def _present_timeline(cell: Cell, buckets: int) -> dict[str, Any] | None:
    """The timeline now without reading every version: bucket totals from the ordinals at
    the bucket edges, and the versions that are not superseded (few, on
    version_cell_status_idx) placed in their buckets; the rest of each bucket is superseded.
    None when the key holds too many such versions (then the aggregate counts them)."""
    marked = list(Version.objects.filter(cell=cell, status__in=[
        s for s in Status if s != Status.SUPERSEDED]).values_list("ordinal", "status")
        [:TIMELINE_MARKED_MAX + 1])
    if len(marked) > TIMELINE_MARKED_MAX:
        return None
    ends = Version.objects.filter(cell=cell).aggregate(lo=Min("created_at"), hi=Max("created_at"))
    start, end = ends["lo"], ends["hi"]
    if start is None or end is None:
        return {"versions": 0, "buckets": []}
    span = (end - start) / buckets
    edges = [start + span * i for i in range(1, buckets)] + [end]
    with connection.cursor() as cur:
        cur.execute(_EDGES_SQL, {"cell": cell.pk, "edges": edges})
        reached = [(n or 0, vid) for _, n, vid in cur.fetchall()]
    firsts = [(prev[0] if i else 0) + 1 for i, prev in
              enumerate([(0, None), *reached[:-1]])]
    first_ids = dict(Version.objects.filter(cell=cell, ordinal__in=firsts)
                     .values_list("ordinal", "id"))  # on version_ordinal_unique
    out = []
    below = 0
    marks = sorted(marked)
    for i, (n, vid) in enumerate(reached):
        counts: dict[str, int] = {}
        lo, hi = bisect_right(marks, (below, "~")), bisect_right(marks, (n, "~"))
        for _, status in marks[lo:hi]:
            counts[status] = counts.get(status, 0) + 1
        if n - below - (hi - lo) > 0:
            counts[str(Status.SUPERSEDED)] = n - below - (hi - lo)
        first_id = first_ids.get(below + 1) if n > below else None
        out.append({"start": start + span * i, "end": start + span * (i + 1),
                    "total": n - below, "counts": counts, "first": first_id,
                    "last": vid if n > below else None, "first_ordinal": below + 1
                    if n > below else None, "last_ordinal": n if n > below else None})
        below = max(below, n)
    return {"versions": below, "buckets": out}


def status_timeline(cell: Cell, *, buckets: int, as_of: datetime | None) -> dict[str, Any]:
    """The whole chain in ``buckets`` stretches of commit time, counted by status, every
    bucket present (empty ones too: time stays linear along the bar), in the shape
    timeline.js draws. Now: from the ordinals at the bucket edges and the few versions that
    are not superseded (bounded: never a pass over the history). As of T: memory.history's
    aggregate (statuses then come from the status spans)."""
    if as_of is None:
        fast = _present_timeline(cell, buckets)
        if fast is not None:
            fast.update(key=cell.key, as_of=None)
            return fast
    data = mh.status_timeline(cell, buckets=buckets, as_of=as_of)
    start, end = data["start"], data["end"]
    by_bucket = {b["bucket"]: b for b in data["bins"]}
    out = []
    if start is not None and end is not None:
        span = (end - start) / buckets
        for i in range(1, buckets + 1):
            b = by_bucket.get(i)
            out.append({"start": start + span * (i - 1), "end": start + span * i,
                        "total": sum(b["counts"].values()) if b else 0,
                        "counts": b["counts"] if b else {},
                        "first": b["first_version"] if b else None,
                        "last": b["last_version"] if b else None,
                        "first_ordinal": b["first_ordinal"] if b else None,
                        "last_ordinal": b["last_ordinal"] if b else None})
    return {"key": cell.key, "versions": data["total"], "buckets": out,
            "as_of": data["as_of"]}


def frontier_page_as_of(namespace: Namespace, *, as_of: datetime, after: str | None,
                        limit: int) -> tuple[list[dict[str, Any]], str | None]:
    """One page of the frontier as of T, in key order: ``(rows, next key or None)``."""
    rows, nxt = mh.frontier_as_of(namespace, as_of, after=after or "", limit=limit)
    return [r.as_dict() for r in rows], nxt
