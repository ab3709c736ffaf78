"""The explorer's one door to ``memory.history`` (bounded history reads and time travel):
the cell page and its fragments call these, shaped as the templates and scripts need them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Count, Max, Min

from memory.domain import HEAD_STATUSES, Status
from memory.models import Cell, Version
from memory.selectors import cell_graph, cell_status


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


def _entry(v: Version) -> dict[str, Any]:
    return {"version": v.id, "ordinal": getattr(v, "ordinal", None), "value": v.value,
            "status": v.status, "valid_from": v.valid_from, "valid_to": v.valid_to,
            "support": v.support}


def cell_state(cell: Cell, *, as_of: datetime | None) -> CellState:
    head = cell.head
    alternatives = [_entry(v) for v in Version.objects.filter(cell=cell, status=Status.ALTERNATIVE)
                    .order_by("id")]
    total = Version.objects.filter(cell=cell).count()
    return CellState(head.value if head else None, cell_status(head), head.id if head else None,
                     getattr(head, "ordinal", None), head.support if head else 0, total,
                     alternatives)


def version_status_at(version_id: int, as_of: datetime) -> str | None:
    return Version.objects.filter(pk=version_id).values_list("status", flat=True).first()


def history_page(cell: Cell, *, before: str | None, limit: int, as_of: datetime | None,
                 search: str | None) -> HistoryPage:
    qs = Version.objects.filter(cell=cell)
    if search:
        qs = qs.filter(value__icontains=search)
    total = qs.count()
    if before:
        qs = qs.filter(id__lt=int(before))
    rows = list(qs.order_by("-id")[: limit + 1])
    nxt = str(rows[limit - 1].id) if len(rows) > limit else None
    return HistoryPage([_entry(v) for v in rows[:limit]], total, nxt, None)


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


_ = HEAD_STATUSES
