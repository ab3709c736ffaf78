"""Reads only the explorer needs: overview counts, a frontier page, the live fingerprint.

Everything here is a read built on ``memory.models`` and ``memory.selectors``; the explorer's
writes all go through ``memory.services``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Exists, F, Max, OuterRef, Q, QuerySet, TextField
from django.db.models.fields.json import KT, KeyTransform
from django.db.models.functions import Cast, Left, Length
from django.utils import timezone

from memory.domain import UNSETTLED_STATES, CellStatus, EvidenceState, OpType, Status
from memory.models import Cell, Evidence, Namespace, Operation, SupportEdge, Version
from memory.selectors import (
    LIST_TEXT_CHARS,
    cell_graph,
    cell_status,
    cells_list,
    operations_list,
)

UNSETTLED = UNSETTLED_STATES
RECENT = timedelta(hours=24)
#: Characters of an operation's raw model output the log shows; the observation page shows it
#: whole, once (one annotation call's output is stored on each operation it produced).
LOG_RAW_OUTPUT_CHARS = 2000
BIGINT_MAX = 2**63 - 1
#: Counting stops here: an exact COUNT(*) over 100k cells on every page view buys nothing.
COUNT_CAP = 10_000


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
    pending = grouped(Evidence.objects.filter(namespace_id__in=ids, state__in=UNSETTLED).order_by())
    failed = grouped(Evidence.objects.filter(namespace_id__in=ids, state=EvidenceState.FAILED)
                     .order_by())
    return [NamespaceRow(n, roles.get(n.pk, "superuser"), cells.get(n.pk, 0),
                         contested.get(n.pk, 0), pending.get(n.pk, 0), failed.get(n.pk, 0))
            for n in namespaces]


@dataclass(frozen=True)
class FrontierRow:
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
    rows: list[FrontierRow]
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
        rows.append(FrontierRow(
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


def observations_unsettled(*, namespace: Namespace, limit: int = 50,
                           failed_only: bool = False) -> list[Evidence]:
    """Observations not committed yet (pending, processing) or failed, newest first."""
    states = [EvidenceState.FAILED] if failed_only else [*UNSETTLED, EvidenceState.FAILED]
    # A row shows the head of its text, else of its facts: both cut in SQL under their own
    # names (``text_head``, ``facts_head``), so a megabyte of facts never leaves the database
    # for a table cell (decision 21).
    return list(Evidence.objects.filter(namespace=namespace, state__in=states)
                .only("id", "namespace_id", "seq", "state", "source", "error", "received_at")
                .annotate(text_head=Left("text", LIST_TEXT_CHARS),
                          facts_head=Left(Cast("facts", TextField()), LIST_TEXT_CHARS))
                .order_by("-seq")[:limit])


#: How far back the log looks for observations whose model answer had facts dropped.
DROPS_WINDOW = 500
#: How much of such an observation's raw model answer the log shows.
DROPS_RAW_CHARS = 4000


def observations_with_drops(*, namespace: Namespace, limit: int = 20) -> list[Evidence]:
    """Recent observations (the last ``DROPS_WINDOW`` seqs, so the scan stays bounded on a
    long history) whose extraction dropped facts a model gave, newest first. Each carries
    ``dropped`` and the head of the raw answer (``raw_head``), cut out of the extraction in
    SQL: the extraction itself (facts, vectors) never leaves the database (decision 21)."""
    next_seq = Namespace.objects.filter(pk=namespace.pk).values_list("next_seq", flat=True)[0]
    return list(Evidence.objects.only("id", "namespace_id", "seq")
                .filter(namespace=namespace, seq__gte=next_seq - DROPS_WINDOW,
                        extracted__has_key="dropped")
                .annotate(dropped=KeyTransform("dropped", "extracted"),
                          raw_head=Left(KT("extracted__raw"), DROPS_RAW_CHARS))
                .order_by("-seq")[:limit])


def operation_log(*, namespace: Namespace, key: str | None = None, actor: str | None = None,
                  before: int | None = None, limit: int = 50) -> list[Operation]:
    """A page of the operation log, newest first (keyset on op_log_idx). Each row carries its
    observation's seq and the head of its text (``evidence_seq``, ``evidence_head``) and the
    head of its raw model output (``raw_head``, ``raw_truncated``), never the observation row
    itself nor a payload the log does not show (decision 21)."""
    qs = (operations_list(namespace=namespace, key=key, actor=actor)
          .defer("payload", "raw_output")
          .annotate(evidence_seq=F("evidence__seq"),
                    evidence_head=Left("evidence__text", LIST_TEXT_CHARS),
                    raw_head=Left("raw_output", LOG_RAW_OUTPUT_CHARS),
                    raw_chars=Length("raw_output")))
    if before is not None:
        qs = qs.filter(id__lt=before)
    ops: list[Operation] = list(qs[:limit])
    for o in ops:
        # Annotated attributes a template reads; django-stubs cannot see them on the model.
        o.raw_truncated = o.raw_chars > LOG_RAW_OUTPUT_CHARS  # type: ignore[attr-defined]
    return ops


@dataclass(frozen=True)
class ObservationPage:
    evidence: Evidence  # shown whole: text and facts (not the extraction or the embedding)
    operations: list[dict[str, Any]]  # what it did, values cut to LIST_TEXT_CHARS
    raw_outputs: list[str]  # each distinct raw model output once


def observation_page(*, namespace: Namespace, evidence_id: int) -> ObservationPage | None:
    """One observation whole: where graphs and lists link for the text they cut."""
    if evidence_id > BIGINT_MAX:
        return None
    evidence = (Evidence.objects.filter(namespace=namespace, pk=evidence_id)
                .defer("extracted", "embedding").first())
    if evidence is None:
        return None
    produced = Operation.objects.filter(evidence_id=evidence.pk)
    operations = list(produced.order_by("id").values(
        "id", "type", "requested", "key", "cell_id", "version_id", "reason", "actor", "method",
        value_head=Left("value", LIST_TEXT_CHARS)))
    raw_outputs = list(produced.exclude(raw_output="").order_by("raw_output")
                       .values_list("raw_output", flat=True).distinct())
    return ObservationPage(evidence, [dict(o) for o in operations], raw_outputs)


def live_fingerprint(namespace: Namespace) -> str:
    """Changes whenever a worker or a person writes to the namespace: the newest operation,
    the next evidence seq and the number of unsettled observations (a failure or a retry
    changes that count, so failed rows need no scan of their own). Three index lookups
    (op_log_idx, the namespace row, evidence_unsettled_idx): cheap enough to poll."""
    last_op = Operation.objects.filter(namespace=namespace).aggregate(m=Max("id"))["m"] or 0
    next_seq = Namespace.objects.filter(pk=namespace.pk).values_list("next_seq", flat=True).first()
    unsettled = Evidence.objects.filter(namespace=namespace, state__in=UNSETTLED).count()
    return f"{last_op}-{next_seq}-{unsettled}"


@dataclass(frozen=True)
class ExplorerGraph:
    key: str
    nodes: list[dict[str, Any]]
    edges: list[dict[str, Any]]  # the selector's typed edges
    derived: list[dict[str, Any]] = field(default_factory=list)  # operation -> version links

    def as_dict(self) -> dict[str, Any]:
        return {"key": self.key, "nodes": self.nodes, "edges": self.edges, "derived": self.derived}


def explorer_graph(*, namespace: Namespace, key: str) -> ExplorerGraph | None:
    """``cell_graph`` plus an ``applied_to`` link from each operation to the version it created
    or targeted, so the drawing shows which operation made which version."""
    graph = cell_graph(namespace=namespace, key=key)
    if graph is None:
        return None
    version_ids = {n["id"] for n in graph["nodes"] if n["kind"] == "version"}
    derived = [{"source": n["id"], "target": f"v{n['version']}", "type": "applied_to"}
               for n in graph["nodes"]
               if n["kind"] == "operation" and n.get("version") and f"v{n['version']}" in version_ids]
    return ExplorerGraph(str(graph["key"]), graph["nodes"], graph["edges"], derived)


#: A version's status as a reviewer reads it beside a line of a raw read.
LINE_MARKS: dict[str, str] = {Status.REVOKED: "retracted", Status.SUPERSEDED: "superseded",
              Status.CONTRADICTED: "contradicted", Status.ACTIVE: "current",
              Status.CONTESTED: "contested", Status.ALTERNATIVE: "alternative"}


def evidence_effects(evidence_ids: list[int]) -> dict[int, list[dict[str, Any]]]:
    """What each observation of a raw read stands for now, by key: the versions it supports
    (their status as a mark: current, superseded, retracted, …) and the retractions or
    rejections it asked for. Two queries for any number of lines."""
    out: dict[int, list[dict[str, Any]]] = {i: [] for i in evidence_ids}
    if not evidence_ids:
        return out
    seen: set[tuple[int, str, str]] = set()
    for row in (SupportEdge.objects.filter(evidence_id__in=evidence_ids)
                .order_by("evidence_id", "version_id")
                .values("evidence_id", "version_id", "version__status", "version__cell__key")):
        mark = LINE_MARKS.get(row["version__status"], row["version__status"])
        entry = (row["evidence_id"], row["version__cell__key"], mark)
        if entry not in seen:
            seen.add(entry)
            out[row["evidence_id"]].append({"key": row["version__cell__key"], "mark": mark})
    for op in (Operation.objects.filter(evidence_id__in=evidence_ids, cell__isnull=False,
                                         type__in=(OpType.REVOKE, OpType.REJECT))
                .order_by("evidence_id", "id").values("evidence_id", "type", "cell__key")):
        mark = "retraction" if op["type"] == OpType.REVOKE else "rejection"
        entry = (op["evidence_id"], op["cell__key"], mark)
        if entry not in seen:
            seen.add(entry)
            out[op["evidence_id"]].append({"key": op["cell__key"], "mark": mark})
    return out
