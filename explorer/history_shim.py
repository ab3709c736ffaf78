"""The explorer's one door to ``memory.history`` (bounded history reads and time travel):
the cell page and its fragments call these, shaped as the templates and scripts need them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Count, Max, Min

from explorer.cell_reads import BadParameter
from memory import history as mh
from memory.models import Cell, Namespace, Version, VersionSpan
from memory.selectors import cell_graph


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


def graph_window(cell: Cell, *, around: int | None, limit: int, side: str | None,
                 as_of: datetime | None) -> dict[str, Any]:
    graph = cell_graph(namespace=cell.namespace, key=cell.key) or {"nodes": [], "edges": []}
    versions = sum(1 for n in graph["nodes"] if n["kind"] == "version")
    return {"nodes": graph["nodes"], "edges": graph["edges"],
            "window": {"versions": versions, "older": 0, "newer": 0}}


def status_timeline(cell: Cell, *, buckets: int, as_of: datetime | None) -> dict[str, Any]:
    rows = list(Version.objects.filter(cell=cell).values("status").annotate(
        n=Count("id"), first=Min("id"), last=Max("id"), start=Min("created_at"),
        end=Max("created_at")))
    if not rows:
        return {"versions": 0, "buckets": []}
    counts = {r["status"]: r["n"] for r in rows}
    bucket = {"start": min(r["start"] for r in rows), "end": max(r["end"] for r in rows),
              "total": sum(counts.values()), "counts": counts,
              "first": min(r["first"] for r in rows), "last": max(r["last"] for r in rows)}
    return {"versions": bucket["total"], "buckets": [bucket]}



def frontier_page_as_of(namespace: Namespace, *, as_of: datetime, after: str | None,
                        limit: int) -> tuple[list[dict[str, Any]], str | None]:
    """One page of the frontier as of T, in key order: ``(rows, next key or None)``."""
    return [], None
