"""The explorer's one door to ``memory.history`` (bounded history reads and time travel):
the cell page and its fragments call these, shaped as the templates and scripts need them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from explorer.cell_reads import BadParameter
from memory import history as mh
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


def status_timeline(cell: Cell, *, buckets: int, as_of: datetime | None) -> dict[str, Any]:
    """memory.history's timeline (bounded: stretch ends by index probes, statuses from the
    versions that are not superseded), every bucket present (empty ones too: time stays
    linear along the bar), in the shape timeline.js draws."""
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
                        limit: int, search: str = "") -> tuple[list[dict[str, Any]], str | None]:
    """One page of the frontier as of T, in key order (``search``: key or value then):
    ``(rows, next key or None)``."""
    rows, nxt = mh.frontier_as_of(namespace, as_of, after=after or "", limit=limit,
                                  search=search or None)
    return [r.as_dict() for r in rows], nxt
