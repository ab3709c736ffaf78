"""A namespace's cells page by page: the overview of namespaces, the explorer's frontier (sorted,
searched in present and past values, counted up to a cap), the frontier as of a past time
(SPEC §9), the review queue of open contests, and the frontier as an export streams it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet
from django.db.models.functions import Left
from django.utils import timezone

from memory.domain import (
    HEAD_STATUSES,
    UNSETTLED_STATES,
    CellStatus,
    EvidenceState,
    OpType,
    Status,
    vocabulary,
)
from memory.domain.metadata import Metadata
from memory.models import Cell, Evidence, Namespace, Operation, SupportEdge, Version

from .cells import cells_list
from .shapes import EXPORT_CHUNK, LIST_TEXT_CHARS, cell_status, stored_json

RECENT = timedelta(hours=24)
#: Counting stops here: an exact COUNT(*) over 100k cells on every page view buys nothing.
COUNT_CAP = 10_000

_HEAD_IN = ", ".join(f"'{s}'" for s in sorted(HEAD_STATUSES))


@dataclass(frozen=True)
class NamespaceRow:
    namespace: Namespace
    role: str
    cells: int = 0
    contested: int = 0
    pending: int = 0
    failed: int = 0


def namespace_overview(namespaces: list[Namespace], roles: dict[int, str]) -> list[NamespaceRow]:
    """Counts per namespace in four grouped queries, whatever the number of namespaces."""
    ids = [n.pk for n in namespaces]

    def grouped(qs: QuerySet[Any]) -> dict[int, int]:
        return {r["namespace_id"]: r["n"] for r in qs.values("namespace_id").annotate(n=Count("id"))}

    cells = grouped(Cell.objects.filter(namespace_id__in=ids).order_by())
    contested = grouped(Cell.objects.filter(namespace_id__in=ids,
                                            head__status=Status.CONTESTED).order_by())
    pending = grouped(Evidence.objects.filter(namespace_id__in=ids, state__in=UNSETTLED_STATES).order_by())
    failed = grouped(Evidence.objects.filter(namespace_id__in=ids, state=EvidenceState.FAILED)
                     .order_by())
    return [NamespaceRow(n, roles.get(n.pk, "superuser"), cells.get(n.pk, 0),
                         contested.get(n.pk, 0), pending.get(n.pk, 0), failed.get(n.pk, 0))
            for n in namespaces]


@dataclass(frozen=True)
class FrontierPageRow:
    key: str
    value: str | None
    status: str
    support: int
    changed_at: datetime | None
    changed_by: str
    change: str
    past_match: str | None = None  # the earlier value the search matched, when only that did
    alternatives: tuple[str, ...] = ()  # a contested cell's competing values


@dataclass(frozen=True)
class FrontierPage:
    rows: list[FrontierPageRow]
    total: int
    total_capped: bool
    page: int
    pages: int
    first: int  # 1-based position of the first row shown (0 when none)
    last: int
    sort: str
    has_next: bool = False


#: The frontier's sortable columns: name -> ordering (a key order breaks ties, so a page is
#: stable). "changed" is the cell's last change (``updated_at``).
FRONTIER_SORTS: dict[str, tuple[Any, ...]] = {
    "key": (F("key").asc(),),
    "value": (F("head__value").asc(nulls_last=True), F("key").asc()),
    "status": (F("head__status").asc(nulls_last=True), F("key").asc()),
    "support": (F("head__support").desc(nulls_last=True), F("key").asc()),
    "changed": (F("updated_at").desc(), F("key").asc()),
}
FRONTIER_PER_PAGE = 30
#: What a search splits into words: spaces and the separators keys use (alice_home_city).
_WORD_SPLIT = re.compile(r"[\s_.:/-]+")


def search_terms(search: str) -> list[str]:
    """``alice home`` and ``alice_home`` both give ``[alice, home]``; at most 8 words."""
    return [t for t in _WORD_SPLIT.split(search.strip()) if t][:8]


def default_sort(show: str) -> str:
    """Changed lately: newest first; otherwise key order."""
    return "changed" if show == "recent" else "key"


def _sort_order(sort: str) -> tuple[Any, ...]:
    """``sort`` is a column name, ``-`` in front reverses it."""
    name = sort.lstrip("-")
    order = FRONTIER_SORTS.get(name, FRONTIER_SORTS["key"])
    if not sort.startswith("-"):
        return order
    return tuple(o.copy().reverse_ordering() if i == 0 else o for i, o in enumerate(order))


def _frontier_queryset(namespace: Namespace, show: str, search: str) -> QuerySet[Cell]:
    status = show if show in (CellStatus.CONTESTED, CellStatus.EMPTY) else None
    qs = cells_list(namespace=namespace, status=status)
    # Every word must appear in the key, the current value or an earlier value of the cell.
    for term in search_terms(search):
        qs = qs.filter(Q(key__icontains=term) | Q(head__value__icontains=term)
                       | _in_past_values(namespace, term))
    if show == "recent":
        qs = qs.filter(updated_at__gte=timezone.now() - RECENT)
    return qs


#: A word found in at most this many cells' earlier values is matched by their ids (one scan of
#: the namespace's versions); a commoner word by a per-cell EXISTS.
PAST_IDS_MAX = 2000


def _in_past_values(namespace: Namespace, term: str) -> Q | Exists:
    """Cells with an earlier value containing ``term``. A rare word (the usual search) costs one
    pass over the versions and a list of ids; the per-cell EXISTS probe, which costs a lookup
    for every cell whose key and value do not match, is kept for common words."""
    ids = list(Version.objects.filter(namespace=namespace, value__icontains=term)
               .values_list("cell_id", flat=True).distinct()[: PAST_IDS_MAX + 1])
    if len(ids) <= PAST_IDS_MAX:
        return Q(pk__in=ids)
    return Exists(Version.objects.filter(cell_id=OuterRef("pk"), value__icontains=term))


def frontier_page(*, namespace: Namespace, show: str = "all", search: str = "",
                  sort: str = "", page: int = 1,
                  per_page: int = FRONTIER_PER_PAGE) -> FrontierPage:
    """One page of cells in the chosen order, each with its last change and who made it, and
    its position among all that match ("31–60 of 412"). The count stops at ``COUNT_CAP``."""
    sort = sort if sort.lstrip("-") in FRONTIER_SORTS else default_sort(show)
    qs = _frontier_queryset(namespace, show, search)
    total = qs.order_by()[: COUNT_CAP + 1].count()
    shown = min(total, COUNT_CAP)
    pages = max(1, -(-shown // per_page))
    # Past the counting cap the pages go on (one row more tells whether another follows).
    page = max(page, 1) if total > COUNT_CAP else min(max(page, 1), pages)
    offset = (page - 1) * per_page
    cells = list(qs.order_by(*_sort_order(sort))[offset: offset + per_page + 1])
    has_next, cells = len(cells) > per_page, cells[:per_page]
    last = _last_changes([c.pk for c in cells])
    past = _past_matches(cells, search_terms(search))
    competing = _alternatives([c.pk for c in cells if cell_status(c.head) == CellStatus.CONTESTED])
    rows = []
    for c in cells:
        op = last.get(c.pk)
        head = c.head
        rows.append(FrontierPageRow(
            key=c.key, value=head.value if head else None, status=cell_status(head),
            support=head.support if head else 0,
            changed_at=op["created_at"] if op else c.updated_at,
            changed_by=op["actor"] if op else "", change=op["type"] if op else "",
            past_match=past.get(c.pk), alternatives=tuple(competing.get(c.pk, ())),
        ))
    return FrontierPage(rows, shown, total > COUNT_CAP, page, max(pages, page),
                        offset + 1 if rows else 0, offset + len(rows), sort, has_next)


def _alternatives(cell_ids: list[int]) -> dict[int, list[str]]:
    """The competing values of the page's contested cells, oldest first (one query, none
    when the page has no contest); each cut to ``LIST_TEXT_CHARS``."""
    if not cell_ids:
        return {}
    out: dict[int, list[str]] = {}
    for cell_id, value in (Version.objects.filter(cell_id__in=cell_ids, status=Status.ALTERNATIVE)
                           .order_by("cell_id", "id")
                           .values_list("cell_id", Left("value", LIST_TEXT_CHARS))):
        out.setdefault(cell_id, []).append(value)
    return out


def _past_matches(cells: list[Cell], terms: list[str]) -> dict[int, str]:
    """For the cells of a page that matched a search only through an earlier value, that value
    (one query for the page)."""
    def hit(text: str | None, term: str) -> bool:
        return text is not None and term.lower() in text.lower()

    missing = {c.pk: [t for t in terms if not hit(c.key, t) and not hit(c.head.value if c.head
                                                                         else None, t)]
               for c in cells}
    missing = {pk: ts for pk, ts in missing.items() if ts}
    if not missing:
        return {}
    found: dict[int, str] = {}
    any_term = Q()
    for term in {t for ts in missing.values() for t in ts}:
        any_term |= Q(value__icontains=term)
    rows = (Version.objects.filter(any_term, cell_id__in=list(missing)).order_by("cell_id", "-id")
            .values_list("cell_id", "value"))
    for cell_id, value in rows:
        if cell_id not in found and all(hit(value, t) for t in missing[cell_id]):
            found[cell_id] = value
    return found


def _last_changes(cell_ids: list[int]) -> dict[int, dict[str, Any]]:
    """The newest operation that changed each cell (support noops are not changes)."""
    if not cell_ids:
        return {}
    rows = (Operation.objects.filter(cell_id__in=cell_ids).exclude(type=OpType.NOOP)
            .order_by("cell_id", "-id").distinct("cell_id")
            .values("cell_id", "actor", "type", "created_at"))
    return {r["cell_id"]: dict(r) for r in rows}


# --- as of a past time ------------------------------------------------------------------------

_FRONTIER_AT_SQL = f"""
SELECT c.id, c.key, h.version_id, h.status, hv.value, n.n, hv.ordinal, hv.metadata,
       hv.expires_at FROM memory_cell c
 CROSS JOIN LATERAL (
     SELECT max(x.ordinal) AS n FROM memory_version x WHERE x.cell_id = c.id
        AND x.created_at = (SELECT max(y.created_at) FROM memory_version y
                             WHERE y.cell_id = c.id AND y.created_at <= %(t)s)) AS n
 LEFT JOIN LATERAL (
     SELECT s.version_id, s.status, s.until FROM memory_versionspan s
      WHERE s.cell_id = c.id AND s.status IN ({_HEAD_IN}) AND s.since <= %(t)s
      ORDER BY s.since DESC, s.id DESC LIMIT 1) AS h0 ON true
 LEFT JOIN LATERAL (
     SELECT h0.version_id, h0.status WHERE h0.until IS NULL OR h0.until > %(t)s) AS h ON true
 LEFT JOIN memory_version hv ON hv.id = h.version_id
 WHERE c.namespace_id = %(ns)s AND c.key > %(after)s AND n.n IS NOT NULL{{filters}}
 ORDER BY c.key LIMIT %(limit)s
"""


@dataclass(frozen=True)
class FrontierAsOfRow:
    """A cell as it was at ``as_of``: its value and status then, and how many versions it held
    (``support`` is the present's only: None)."""

    cell_id: int
    key: str
    version: int | None
    status: str  # a CellStatus
    value: str | None
    history_total: int
    as_of: datetime
    support: None = None
    # The head at T's own (None for a key empty then), read with it.
    ordinal: int | None = None
    metadata: Metadata | None = None
    expires_at: datetime | None = None


def frontier_as_of(namespace: Namespace, as_of: datetime, *, after: str = "",
                   limit: int = 50, status: str | None = None, search: str | None = None,
                   metadata: dict[str, Any] | None = None
                   ) -> tuple[list[FrontierAsOfRow], str | None]:
    """The cells as they were at ``as_of``, by key after ``after``: ``(rows, next after)``.
    A key is listed if it had a version by T (an erased key has none: SPEC §6); before the
    namespace's first commit the answer is empty. ``status`` filters by the cell's status at
    T, ``search`` by key or value at T (contains, case-insensitive), ``metadata`` by the
    head at T's metadata (each entry equal). One statement; it walks the keys in order until
    the page is full, each with index probes only."""
    filters = ""
    params: dict[str, Any] = {"t": as_of, "ns": namespace.pk, "after": after,
                              "limit": limit + 1}
    if status == CellStatus.EMPTY:
        filters += " AND h.version_id IS NULL"
    elif status in (CellStatus.ACTIVE, CellStatus.CONTESTED):
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
    out = [FrontierAsOfRow(r[0], r[1], r[2], vocabulary.cell_status(r[3]), r[4], int(r[5]),
                           as_of, ordinal=r[6], metadata=stored_json(r[7]), expires_at=r[8])
           for r in rows[:limit]]
    return out, (out[-1].key if len(rows) > limit and out else None)


# --- the review queue -------------------------------------------------------------------------


#: The review queue's orders: the least recently changed first, the most recent, by key.
QUEUE_ORDERS = {"oldest": ("updated_at", "key"), "newest": ("-updated_at", "key"),
                "key": ("key",)}


def contested_cells(namespace: Namespace) -> QuerySet[Cell]:
    return Cell.objects.filter(namespace=namespace, head__status=Status.CONTESTED)


def open_contests(*, namespace: Namespace, limit: int = 100,
                  order: str = "oldest") -> list[dict[str, Any]]:
    """Contested cells in ``order`` (:data:`QUEUE_ORDERS`), each with its competing values
    inline: the head and every alternative (value, its ordinal, support, the sources behind
    it and its newest observation: text head, source, time). Four queries."""
    cells = list(contested_cells(namespace).select_related("head")
                 .order_by(*QUEUE_ORDERS.get(order, QUEUE_ORDERS["oldest"]))[:limit])
    if not cells:
        return []
    versions = list(Version.objects.filter(cell__in=cells, status__in=[
        Status.CONTESTED, Status.ALTERNATIVE]).order_by("id").values(
        "id", "ordinal", "cell_id", "status", "support", "valid_from",
        value_head=Left("value", LIST_TEXT_CHARS)))
    sources: dict[int, set[str]] = {}
    for vid, source in SupportEdge.objects.filter(
            version_id__in=[v["id"] for v in versions]).values_list("version_id",
                                                                    "evidence__source"):
        if source:
            sources.setdefault(vid, set()).add(source)
    # Why each value is there: the newest observation behind it (one per version).
    observed = {row["version_id"]: dict(row) for row in SupportEdge.objects.filter(
        version_id__in=[v["id"] for v in versions], evidence__isnull=False)
        .order_by("version_id", "-id").distinct("version_id").values(
            "version_id", "evidence_id", seq=F("evidence__seq"), source=F("evidence__source"),
            at=F("evidence__received_at"), text=Left("evidence__text", LIST_TEXT_CHARS))}
    out = []
    for cell in cells:
        mine = [dict(v, sources=sorted(sources.get(v["id"], ())), observed=observed.get(v["id"]))
                for v in versions if v["cell_id"] == cell.pk]
        out.append({"key": cell.key, "since": cell.updated_at, "candidates": mine})
    return out


# --- export -----------------------------------------------------------------------------------

FRONTIER_FIELDS = ("key", "value", "status", "version", "support", "updated_at")


def frontier_rows(*, namespace: Namespace) -> Iterator[tuple[Any, ...]]:
    """Every headed cell, by key, streamed."""
    return (Cell.objects.filter(namespace=namespace, head__isnull=False).order_by("key")
            .values_list("key", "head__value", "head__status", "head_id", "head__support",
                         "updated_at")
            .iterator(chunk_size=EXPORT_CHUNK))


