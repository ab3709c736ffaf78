"""Reads of the reviewer's workbench (issue 17): the readable operation log with its position,
the review queue of open contests, contests closed by later writes, what changed on a cell
since a reviewer looked, two versions side by side, and streamed exports."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Exists, F, Func, IntegerField, OuterRef, QuerySet
from django.db.models.fields.json import KT, KeyTransform
from django.db.models.functions import Left, Length

from explorer.selectors import LOG_RAW_OUTPUT_CHARS
from memory.domain import HEAD_STATUSES, REINSTATE, EvidenceState, OpType, Status
from memory.domain.undo import compensation, undo_label
from memory.domain.wording import plain_method, plain_reason
from memory.models import Cell, Evidence, Namespace, Operation, SupportEdge, Version
from memory.selectors import observation_note, operations_list

#: Characters of a value a log row or a queue entry shows (the cell page shows it whole).
VALUE_CHARS = 200


@dataclass(frozen=True)
class LogFilters:
    key: str = ""
    key_contains: str = ""
    op: str = ""
    actor: str = ""
    source: str = ""

    def queryset(self, namespace: Namespace) -> QuerySet[Operation]:
        return operations_list(namespace=namespace, key=self.key or None,
                               key_contains=self.key_contains or None, op=self.op or None,
                               actor=self.actor or None, source=self.source or None)

    def active(self) -> bool:
        return any((self.key, self.key_contains, self.op, self.actor, self.source))


@dataclass
class LogPage:
    rows: list[Operation]
    first: int  # 1-based position of the first row among the filtered operations
    total: int
    older: int | None  # the ``before`` cursor of the next page
    newer: int | None  # the ``before`` cursor of the previous page (0: the first page)
    positions: list[int] = field(default_factory=list)

    @property
    def last(self) -> int:
        return self.first + len(self.rows) - 1


def log_page(*, namespace: Namespace, filters: LogFilters, before: int | None,
             limit: int = 50) -> LogPage:
    """A page of the log, newest first, with the value of the version each row names, its
    reason and method in plain words, and where the page lies among the filtered rows
    (three queries: the rows, the total, the rows before this page)."""
    qs = filters.queryset(namespace)
    page = qs.defer("payload", "raw_output").annotate(
        version_value=Left("version__value", VALUE_CHARS), version_ordinal=F("version__ordinal"),
        evidence_seq=F("evidence__seq"),
        evidence_head=Left("evidence__text", VALUE_CHARS),
        raw_head=Left("raw_output", LOG_RAW_OUTPUT_CHARS), raw_chars=Length("raw_output"))
    if before is not None:
        page = page.filter(id__lt=before)
    rows: list[Operation] = list(page[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    for o in rows:
        o.reason_words = plain_reason(o.reason)  # type: ignore[attr-defined]
        o.method_words = plain_method(o.method)  # type: ignore[attr-defined]
        o.raw_truncated = o.raw_chars > LOG_RAW_OUTPUT_CHARS  # type: ignore[attr-defined]
    total = qs.count()
    newer_count = qs.filter(id__gte=before).count() if before is not None else 0
    newer = None
    if before is not None:
        back = list(qs.filter(id__gte=before).order_by("id").values_list("id", flat=True)
                    [limit: limit + 1])
        newer = back[0] if back else 0
    return LogPage(rows, newer_count + 1, total, rows[-1].pk if more and rows else None, newer)


# --- the review queue ------------------------------------------------------------------------


#: The review queue's orders: the least recently changed first, the most recent, by key.
QUEUE_ORDERS = {"oldest": ("updated_at", "key"), "newest": ("-updated_at", "key"),
                "key": ("key",)}


def contested_cells(namespace: Namespace) -> QuerySet[Cell]:
    return Cell.objects.filter(namespace=namespace, head__status=Status.CONTESTED)


def open_contests(*, namespace: Namespace, limit: int = 100,
                  order: str = "oldest") -> list[dict[str, Any]]:
    """Contested cells in ``order`` (:data:`QUEUE_ORDERS`), each with its competing values
    inline: the head and every alternative (value, support, the sources behind it). Three
    queries."""
    cells = list(contested_cells(namespace).select_related("head")
                 .order_by(*QUEUE_ORDERS.get(order, QUEUE_ORDERS["oldest"]))[:limit])
    if not cells:
        return []
    versions = list(Version.objects.filter(cell__in=cells, status__in=[
        Status.CONTESTED, Status.ALTERNATIVE]).order_by("id").values(
        "id", "cell_id", "status", "support", "valid_from", value_head=Left("value", VALUE_CHARS)))
    sources: dict[int, set[str]] = {}
    for vid, source in SupportEdge.objects.filter(
            version_id__in=[v["id"] for v in versions]).values_list("version_id",
                                                                    "evidence__source"):
        if source:
            sources.setdefault(vid, set()).add(source)
    out = []
    for cell in cells:
        mine = [dict(v, sources=sorted(sources.get(v["id"], ()))) for v in versions
                if v["cell_id"] == cell.pk]
        out.append({"key": cell.key, "since": cell.updated_at, "candidates": mine})
    return out


def closed_contests(*, namespace: Namespace, after: int, limit: int = 50) -> list[Operation]:
    """Operations after ``after`` that closed a contest without a resolve (a later accept, a
    retraction, …): who closed it, how and with what value (op_closed_contest_idx)."""
    rows: list[Operation] = list(
        Operation.objects.filter(namespace=namespace, id__gt=after,
                                 payload__has_key="closed_contest")
        .exclude(type=OpType.RESOLVE).defer("raw_output")
        .annotate(version_value=Left("version__value", VALUE_CHARS)).order_by("-id")[:limit])
    return rows


def last_operation_id(namespace: Namespace, key: str | None = None) -> int:
    qs = Operation.objects.filter(namespace=namespace)
    if key is not None:
        qs = qs.filter(key=key)
    return qs.order_by("-id").values_list("id", flat=True).first() or 0


def changes_since(*, namespace: Namespace, key: str, seen: int | None,
                  limit: int = 5) -> list[Operation]:
    """What happened to ``key`` after operation ``seen`` (the newest the reviewer's page
    showed), newest first; without ``seen``, its last few operations."""
    qs = Operation.objects.filter(namespace=namespace, key=key).exclude(type=REINSTATE)
    if seen:
        qs = qs.filter(id__gt=seen)
    rows: list[Operation] = list(qs.defer("raw_output").annotate(
        version_value=Left("version__value", VALUE_CHARS)).order_by("-id")[:limit])
    for o in rows:
        o.reason_words = plain_reason(o.reason)  # type: ignore[attr-defined]
    return rows


def undo_offer(operation: Operation) -> dict[str, Any] | None:
    """The Undo a success message offers for ``operation`` (None: nothing to undo)."""
    if operation.type in (REINSTATE, OpType.NOOP):
        return None
    if not compensation(operation.type, operation.version_id,
                        operation.payload.get("effects") or [], operation.payload):
        return None
    return {"operation": operation.pk, "label": undo_label(operation.type)}


# --- diff --------------------------------------------------------------------------------------


def version_side(*, namespace: Namespace, key: str, version_id: int) -> dict[str, Any] | None:
    """One version of ``key`` for the side-by-side comparison: value, status, validity,
    support, the operation that made it (actor, method, reason) and its evidence."""
    version = (Version.objects.filter(pk=version_id, cell__namespace=namespace, cell__key=key)
               .select_related("created_by").first())
    if version is None:
        return None
    evidence = list(SupportEdge.objects.filter(version=version, evidence__isnull=False)
                    .values("evidence_id", "evidence__seq", "evidence__source",
                            text=Left("evidence__text", VALUE_CHARS)).order_by("evidence__seq"))
    op = version.created_by
    return {"version": version, "evidence": evidence, "operation": op,
            "reason_words": plain_reason(op.reason) if op else "",
            "head": version.status in HEAD_STATUSES}


def version_choices(*, namespace: Namespace, key: str, limit: int = 200) -> list[Any]:
    return list(Version.objects.filter(cell__namespace=namespace, cell__key=key).order_by("-id")
                .values("id", "status", value_head=Left("value", 60))[:limit])


# --- export ------------------------------------------------------------------------------------

#: Rows fetched per round trip by the exports' server-side cursors.
EXPORT_CHUNK = 2000

HISTORY_FIELDS = ("version", "value", "status", "valid_from", "valid_to", "support",
                  "supersedes", "restores", "created_by_operation")
FRONTIER_FIELDS = ("key", "value", "status", "version", "support", "updated_at")
LOG_FIELDS = ("id", "created_at", "op", "requested", "key", "version", "value", "actor",
              "method", "source", "reason", "observation_seq")


def history_rows(*, cell: Cell) -> Iterator[tuple[Any, ...]]:
    """Every version of ``cell``, newest first, streamed from a server-side cursor."""
    return (Version.objects.filter(cell=cell).order_by("-id")
            .values_list("id", "value", "status", "valid_from", "valid_to", "support",
                         "supersedes_id", "restores_id", "created_by_id")
            .iterator(chunk_size=EXPORT_CHUNK))


def frontier_rows(*, namespace: Namespace) -> Iterator[tuple[Any, ...]]:
    """Every headed cell, by key, streamed."""
    return (Cell.objects.filter(namespace=namespace, head__isnull=False).order_by("key")
            .values_list("key", "head__value", "head__status", "head_id", "head__support",
                         "updated_at")
            .iterator(chunk_size=EXPORT_CHUNK))


def log_rows(*, namespace: Namespace, filters: LogFilters) -> Iterator[tuple[Any, ...]]:
    """The (filtered) log, newest first, streamed; a row without a value gives the value of
    the version it names."""
    return (filters.queryset(namespace)
            .values_list("id", "created_at", "type", "requested", "key", "version_id", "value",
                         "actor", "method", "source", "reason", "seq", "version__value")
            .iterator(chunk_size=EXPORT_CHUNK))


# --- observations that yielded no fact ---------------------------------------------------------

#: How many of a namespace's latest observations the "no fact" list looks through.
NO_FACT_WINDOW = 500


def _facts_found() -> Func:
    return Func(KeyTransform("facts", "extracted"), function="jsonb_array_length",
                output_field=IntegerField())


def observation_yield(evidence: Evidence) -> str:
    """The note an observation page shows when the observation yielded no fact (else '')."""
    found, extractor = (Evidence.objects.filter(pk=evidence.pk)
                        .values_list(_facts_found(), KT("extracted__extractor")).first()
                        or (None, None))
    operations = Operation.objects.filter(evidence_id=evidence.pk).exists()
    return observation_note(state=evidence.state, facts_found=found,
                            operations=int(operations), extractor=extractor)


def observations_without_facts(*, namespace: Namespace, limit: int = 10) -> list[Evidence]:
    """Recent committed observations (the last ``NO_FACT_WINDOW`` seqs: a bounded scan) from
    which extraction took no fact, newest first, with the head of their text."""
    next_seq = Namespace.objects.filter(pk=namespace.pk).values_list("next_seq", flat=True)[0]
    return list(Evidence.objects.only("id", "namespace_id", "seq", "source", "actor",
                                      "committed_at")
                .filter(namespace=namespace, seq__gte=next_seq - NO_FACT_WINDOW,
                        state=EvidenceState.COMMITTED, extracted__facts=[])
                .filter(~Exists(Operation.objects.filter(evidence_id=OuterRef("pk"))))
                .annotate(text_head=Left("text", VALUE_CHARS))
                .order_by("-seq")[:limit])
