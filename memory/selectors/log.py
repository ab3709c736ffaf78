"""The operation log (CONTRACT "Operation log"): filtered pages newest first with their
position, what changed on a key since a reviewer looked, contests later writes closed, the
Undo an operation offers, the log as an export streams it, and the namespace's live
fingerprint. Pages are keysets on ``op_log_idx`` (``(namespace, id)``), never offsets.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import F, Max, Q, QuerySet
from django.db.models.functions import Left, Length

from memory.domain import BIGINT_MAX, REINSTATE, UNSETTLED_STATES, OpType, normalize_key
from memory.domain.undo import compensation, undo_label
from memory.domain.wording import plain_method, plain_reason
from memory.models import ApiToken, Evidence, Namespace, Operation

from .shapes import EXPORT_CHUNK, LIST_TEXT_CHARS, RAW_OUTPUT_CHARS


def operations_list(*, namespace: Namespace, key: str | None = None,
                    actor: str | None = None, key_contains: str | None = None,
                    op: str | None = None, source: str | None = None) -> QuerySet[Operation]:
    """The operation log, newest first, filtered (CONTRACT): ``key`` exactly (normalised, as
    stored), ``key_contains`` a part of a key (normalised the same way, so ``alice home``
    finds ``alice_home_city``), ``op`` a log type, ``actor`` and ``source`` exactly."""
    qs = Operation.objects.filter(namespace=namespace)
    if key:
        qs = qs.filter(key=normalize_key(key))
    if key_contains and normalize_key(key_contains):
        qs = qs.filter(key__contains=normalize_key(key_contains))
    if op:
        qs = qs.filter(type=op)
    if actor:
        qs = qs.filter(actor=actor)
    if source is not None and source != "":
        qs = qs.filter(source=source)
    return qs.order_by("-id")


def operations_page(*, namespace: Namespace, key: str | None = None, actor: str | None = None,
                    key_contains: str | None = None, op: str | None = None,
                    source: str | None = None, before: int | None = None,
                    limit: int = 50) -> tuple[list[Operation], bool]:
    """A page of the filtered log (:func:`operations_list`) newest first, before operation
    ``before``: ``(rows, whether more follow)``; each row carries its version's ``ordinal``
    (None for an operation on no version). One statement (keyset on ``op_log_idx``, each
    row's version by its primary key)."""
    qs = operations_list(namespace=namespace, key=key, actor=actor, key_contains=key_contains,
                         op=op, source=source).annotate(ordinal=F("version__ordinal"))
    if before is not None:
        qs = qs.filter(id__lt=before)
    rows: list[Operation] = list(qs[: limit + 1])
    return rows[:limit], len(rows) > limit


def operation_row(operation_id: int) -> Operation:
    """One operation as the log lists it, with its version's ``ordinal`` (None for an operation
    on no version). One statement."""
    return Operation.objects.annotate(ordinal=F("version__ordinal")).get(pk=operation_id)


@dataclass(frozen=True)
class LogFilters:
    key: str = ""
    key_contains: str = ""
    op: str = ""
    actor: str = ""
    source: str = ""
    #: Committed at or after / at or before (an audit of "what was changed today").
    since: datetime | None = None
    until: datetime | None = None
    #: A token's name or the first characters of its secret (its shown prefix): the rows it
    #: signed, through the API or MCP.
    token: str = ""

    def queryset(self, namespace: Namespace) -> QuerySet[Operation]:
        qs = operations_list(namespace=namespace, key=self.key or None,
                             key_contains=self.key_contains or None, op=self.op or None,
                             actor=self.actor or None, source=self.source or None)
        if self.since is not None:
            qs = qs.filter(created_at__gte=self.since)
        if self.until is not None:
            qs = qs.filter(created_at__lte=self.until)
        if self.token:
            names = token_names(namespace, self.token)
            qs = qs.filter(actor__in=[f"{via}:{n}" for n in names for via in ("api", "mcp")])
        return qs

    def active(self) -> bool:
        return any((self.key, self.key_contains, self.op, self.actor, self.source, self.since,
                    self.until, self.token))


def token_names(namespace: Namespace, token: str) -> list[str]:
    """The names a token filter stands for: the tokens of ``namespace`` (and the application
    tokens reaching it) named so or whose secret starts with it, and the text itself (a
    revoked token's rows keep its name)."""
    reach = Q(namespace=namespace) | Q(namespace__isnull=True)
    found = (ApiToken.objects.filter(reach).filter(Q(name=token) | Q(prefix__startswith=token))
             .values_list("name", flat=True)[:50])
    return sorted({token, *(n for n in found if n)})


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
        version_value=Left("version__value", LIST_TEXT_CHARS), version_ordinal=F("version__ordinal"),
        evidence_seq=F("evidence__seq"),
        evidence_head=Left("evidence__text", LIST_TEXT_CHARS),
        raw_head=Left("raw_output", RAW_OUTPUT_CHARS), raw_chars=Length("raw_output"))
    if before is not None:
        page = page.filter(id__lt=before)
    rows: list[Operation] = list(page[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    for o in rows:
        o.reason_words = plain_reason(o.reason)  # type: ignore[attr-defined]
        o.method_words = plain_method(o.method)  # type: ignore[attr-defined]
        o.raw_truncated = o.raw_chars > RAW_OUTPUT_CHARS  # type: ignore[attr-defined]
    total = qs.count()
    newer_count = qs.filter(id__gte=before).count() if before is not None else 0
    newer = None
    if before is not None:
        back = list(qs.filter(id__gte=before).order_by("id").values_list("id", flat=True)
                    [limit: limit + 1])
        newer = back[0] if back else 0
    return LogPage(rows, newer_count + 1, total, rows[-1].pk if more and rows else None, newer)


# --- contests closed, changes since, undo -----------------------------------------------------


def closed_contests(*, namespace: Namespace, after: int, limit: int = 50) -> list[Operation]:
    """Operations after ``after`` that closed a contest without a reviewer: a later accept,
    a retraction, … (op_closed_contest_idx), and a resolve that an agent (an API or MCP
    token, or the service) asked for — who closed it, how and with what value."""
    by_write = (Q(payload__has_key="closed_contest") & ~Q(type=OpType.RESOLVE))
    by_agent = Q(type=OpType.RESOLVE) & ~Q(actor__startswith="user:")
    rows: list[Operation] = list(
        Operation.objects.filter(namespace=namespace, id__gt=after).filter(by_write | by_agent)
        .defer("raw_output")
        .annotate(version_value=Left("version__value", LIST_TEXT_CHARS)).order_by("-id")[:limit])
    for o in rows:
        o.method_words = plain_method(o.method)  # type: ignore[attr-defined]
        o.reason_words = plain_reason(o.reason)  # type: ignore[attr-defined]
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
        version_value=Left("version__value", LIST_TEXT_CHARS)).order_by("-id")[:limit])
    for o in rows:
        o.reason_words = plain_reason(o.reason)  # type: ignore[attr-defined]
    return rows


def undo_offer(operation: Operation) -> dict[str, Any] | None:
    """The Undo a success message offers for ``operation`` (None: nothing to undo)."""
    if operation.type in (REINSTATE, OpType.NOOP):
        return None
    if not compensation(operation.type, operation.version_id, operation.payload):
        return None
    return {"operation": operation.pk, "label": undo_label(operation.type)}


def operation_key(*, namespace: Namespace, operation_id: int) -> str | None:
    """The key an operation of ``namespace`` acted on; None when there is no such operation
    (an id past ``bigint`` names none)."""
    if operation_id > BIGINT_MAX:
        return None
    return (Operation.objects.filter(namespace=namespace, pk=operation_id)
            .values_list("key", flat=True).first())


# --- export and the live fingerprint ----------------------------------------------------------

LOG_FIELDS = ("id", "created_at", "op", "requested", "key", "version", "value", "actor",
              "method", "source", "reason", "observation_seq")


def log_rows(*, namespace: Namespace, filters: LogFilters) -> Iterator[tuple[Any, ...]]:
    """The (filtered) log, newest first, streamed; a row without a value gives the value of
    the version it names."""
    return (filters.queryset(namespace)
            .values_list("id", "created_at", "type", "requested", "key", "version_id", "value",
                         "actor", "method", "source", "reason", "seq", "version__value")
            .iterator(chunk_size=EXPORT_CHUNK))


def live_fingerprint(namespace: Namespace) -> str:
    """Changes whenever a worker or a person writes to the namespace: the newest operation,
    the next evidence seq and the number of unsettled observations (a failure or a retry
    changes that count, so failed rows need no scan of their own). Three index lookups
    (op_log_idx, the namespace row, evidence_unsettled_idx): cheap enough to poll."""
    last_op = Operation.objects.filter(namespace=namespace).aggregate(m=Max("id"))["m"] or 0
    next_seq = Namespace.objects.filter(pk=namespace.pk).values_list("next_seq", flat=True).first()
    unsettled = Evidence.objects.filter(namespace=namespace, state__in=UNSETTLED_STATES).count()
    return f"{last_op}-{next_seq}-{unsettled}"
