"""Bounded reads of one cell that only the explorer's cell page needs: why a version exists
(its row's expansion), the versions a retraction can pick (by search), the steps of time
travel through a key's operations, and where a "jump to" lands.

Each costs the same at 100 versions and at 1,000,000: every statement is an index probe
or a LIMITed index range ((cell, ordinal), (cell, created_at), the operation's version,
op_key_idx between two of the key's commits), never a scan of the history.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import F, Q, TextField
from django.db.models.functions import Cast, Left, Length

from memory.domain import RESTORABLE_STATUSES, UNSETTLED_STATES, OpType, Status
from memory.domain.instants import TimeRefused, parse_instant, zone_named
from memory.history import version_at
from memory.models import Cell, Evidence, Namespace, Operation, SupportEdge, Version
from memory.selectors import GRAPH_TEXT_CHARS, LIST_TEXT_CHARS, evidence_heads

#: Operations an expanded history row lists (a version polled every minute gathers thousands
#: of support operations; the log has them all).
PROVENANCE_OPS = 30
PROVENANCE_SUPPORTERS = 5
CHOICES = 12
#: How many of a key's newest operations a step reads to find where their commit began.
STEP_WALK = 20
TICK = timedelta(microseconds=1)
_ORDINAL = re.compile(r"^v\s*(\d{1,12})$", re.IGNORECASE)
_GLOBAL_ID = re.compile(r"^(?:id\s*|#)(\d{1,18})$", re.IGNORECASE)
_BARE = re.compile(r"^\d{1,12}$")
BIGINT_MAX = 2**63 - 1


class BadParameter(ValueError):
    """A query parameter the page cannot use: answered 400 naming it."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message


# --- time -----------------------------------------------------------------------------------


def parse_as_of(raw: str | None, name: str = "as_of") -> datetime | None:
    """``as_of`` as CONTRACT has it: ISO 8601 with a zone, read by the one parser of times
    (:mod:`memory.domain.instants`). Empty: the present (None)."""
    try:
        return parse_instant(raw, field=name)
    except TimeRefused as refused:
        raise BadParameter(refused.field, refused.message) from None


def local_as_of(at: str, zone: str) -> datetime:
    """The explorer's date-time field (no zone) read in the browser's ``zone`` (IANA name)."""
    try:
        moment = parse_instant(at, field="at", zone=zone_named(zone))
    except TimeRefused as refused:
        raise BadParameter(refused.field, refused.message) from None
    if moment is None:
        raise BadParameter("at", "not a date and time")
    return moment


def as_of_param(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


# --- observations not committed yet ----------------------------------------------------------


def in_flight(*, namespace: Namespace, limit: int = 5) -> list[Evidence]:
    """The namespace's observations still pending or processing, newest first: read on
    evidence_unsettled_idx (failed ones are the log's business; counting them in here made
    this box scan a namespace's 100,000 observations on every cell page)."""
    return list(Evidence.objects.filter(namespace=namespace, state__in=UNSETTLED_STATES)
                .only("id", "namespace_id", "seq", "state", "source", "error", "received_at")
                .annotate(text_head=Left("text", LIST_TEXT_CHARS),
                          facts_head=Left(Cast("facts", TextField()), LIST_TEXT_CHARS))
                .order_by("-seq")[:limit])


# --- why a version exists ---------------------------------------------------------------------


@dataclass(frozen=True)
class Provenance:
    version: dict[str, Any]
    operations: list[dict[str, Any]]
    more_operations: bool
    supporters: list[dict[str, Any]]


_OP_FIELDS = ("id", "type", "requested", "actor", "reason", "created_at", "evidence_id",
              "version_id")


def _with_evidence(qs: Any) -> Any:
    return qs.annotate(evidence_seq=F("evidence__seq"), evidence_source=F("evidence__source"),
                       evidence_text=Left("evidence__text", GRAPH_TEXT_CHARS),
                       evidence_chars=Length("evidence__text")).values(
        *_OP_FIELDS, "evidence_seq", "evidence_source", "evidence_text", "evidence_chars")


def _operations_of(version: dict[str, Any],
                   as_of: datetime | None) -> tuple[list[dict[str, Any]], bool]:
    """The operations that name the version (its creation, supports, retypes, tombstones):
    the one that created it always, then up to PROVENANCE_OPS others. The operation's version
    index finds them; no ORDER BY over a version's thousands of supports (sorted here)."""
    qs = Operation.objects.filter(version_id=version["version"])
    if as_of is not None:
        qs = qs.filter(created_at__lte=as_of)
    rows = {r["id"]: r for r in _with_evidence(qs)[:PROVENANCE_OPS + 1]}
    more = len(rows) > PROVENANCE_OPS
    creator = version.get("created_by")
    if creator and creator not in rows:
        rows.update({r["id"]: r for r in _with_evidence(Operation.objects.filter(pk=creator))})
    ops = sorted(rows.values(), key=lambda r: r["id"])
    for op in ops:
        op["evidence_truncated"] = (op["evidence_chars"] or 0) > GRAPH_TEXT_CHARS
        op["source"] = op["evidence_source"] or ""
    return ops, more


def version_provenance(*, cell: Cell, version_id: int, as_of: datetime | None = None,
                       status_at: str | None = None) -> Provenance | None:
    """One version of ``cell`` with the operations that made and changed it (each with its
    observation's text head, source, actor and reason: a retraction's "reported in error"
    included) and a few of its supporting observations. None when the version is not the
    cell's, or did not exist yet at ``as_of``. Four statements at most."""
    if version_id > BIGINT_MAX:
        return None
    row = (Version.objects.filter(cell=cell, pk=version_id)
           .values("id", "ordinal", "value", "status", "valid_from", "valid_to", "support",
                   "created_by", "created_at").first())
    if row is None or (as_of is not None and row["created_at"] > as_of):
        return None
    version: dict[str, Any] = {"version": row["id"],
                               **{k: v for k, v in row.items() if k != "id"}}
    if as_of is not None:
        version["status"] = status_at or version["status"]
        valid_to = row["valid_to"]
        if valid_to is not None and valid_to > as_of:
            version["valid_to"] = None
    ops, more = _operations_of(version, as_of)
    shown = {o["evidence_id"] for o in ops if o["evidence_id"]}
    support_ids = list(SupportEdge.objects.filter(version_id=version_id, evidence__isnull=False)
                       .exclude(evidence_id__in=shown)
                       .values_list("evidence_id", flat=True)[:PROVENANCE_SUPPORTERS])
    supporters = list(evidence_heads(support_ids).values()) if support_ids else []
    return Provenance(version, ops, more, supporters)


# --- retract by search ------------------------------------------------------------------------


def version_choices(*, cell: Cell, search: str = "",
                    limit: int = CHOICES) -> tuple[list[dict[str, Any]], bool] | None:
    """Versions a retraction may name (not revoked yet), newest first: the newest ``limit``
    (a LIMITed backward walk of (cell, ordinal)), or the one ``search`` names (``v12``,
    ``id 345``). None when ``search`` is text to look for in values (the history's value
    search does that: :func:`explorer.cell_page.retract_choices`)."""
    qs = Version.objects.filter(cell=cell).exclude(status=Status.REVOKED)
    text = search.strip()
    if text:
        if not (_ORDINAL.match(text) or _BARE.match(text) or _GLOBAL_ID.match(text)):
            return None
        qs = qs.filter(pk=_named_version(cell, text) or 0)
    rows = list(qs.order_by("-ordinal").values("id", "ordinal", "value", "status")[:limit + 1])
    return ([{"version": r["id"], "ordinal": r["ordinal"], "value": r["value"],
              "status": r["status"]} for r in rows[:limit]], len(rows) > limit)


#: Retracted or rejected versions the cell page offers to restore (the newest; the history's
#: rows link to the rest).
RESTORABLE = 10


def restorable_versions(*, cell: Cell, limit: int = RESTORABLE) -> list[dict[str, Any]]:
    """The newest revoked or contradicted versions (what a Restore can bring back), newest
    first: version_cell_status_idx finds them, whatever the length of the history."""
    rows = (Version.objects.filter(cell=cell, status__in=list(RESTORABLE_STATUSES))
            .order_by("-id").values("id", "ordinal", "value", "status")[:limit])
    return [{"version": r["id"], "ordinal": r["ordinal"], "value": r["value"],
             "status": r["status"]} for r in rows]


def _named_version(cell: Cell, text: str) -> int | None:
    """``v12`` or ``12`` (the key's 12th version), ``id 345`` / ``#345`` (a global id): its
    id, if it is a version of ``cell``."""
    m = _ORDINAL.match(text) or _BARE.match(text)
    if m:
        ordinal = int(re.sub(r"\D", "", text))
        return (Version.objects.filter(cell=cell, ordinal=ordinal)
                .values_list("id", flat=True).first())
    m = _GLOBAL_ID.match(text)
    if m and int(m.group(1)) <= BIGINT_MAX:
        return (Version.objects.filter(cell=cell, pk=int(m.group(1)))
                .values_list("id", flat=True).first())
    return None


# --- jump -------------------------------------------------------------------------------------


def resolve_jump(*, cell: Cell, text: str, as_of: datetime | None = None) -> int:
    """Where "jump to" lands: a version of the key (``v12``), a global id (``id 345``), or a
    date-time (the newest version created by then; UTC unless it names a zone). Raises
    BadParameter("jump") when it names nothing of this key."""
    text = (text or "").strip()
    if not text or len(text) > 64:
        raise BadParameter("jump", "say a version (v12), an id (id 345) or a date")
    named = _named_version(cell, text)
    if named is not None:
        created = Version.objects.filter(pk=named).values_list("created_at", flat=True).first()
        if as_of is not None and created is not None and created > as_of:
            raise BadParameter("jump", f"{text} did not exist yet at that time")
        return named
    if _ORDINAL.match(text) or _GLOBAL_ID.match(text) or _BARE.match(text):
        raise BadParameter("jump", f"{text} is not a version of {cell.key}")
    if not re.match(r"^\d{4}-\d\d-\d\d", text):
        raise BadParameter("jump", "not a version (v12), an id (id 345) or a date")
    try:  # a date-time, UTC unless it names a zone; a date alone is its midnight
        moment = parse_instant(text, field="jump", zone=UTC)
    except TimeRefused as refused:
        raise BadParameter("jump", refused.message) from None
    assert moment is not None
    if as_of is not None:
        moment = min(moment, as_of)
    found = version_at(cell, moment)  # the newest created by then, else the first
    if found is None:
        raise BadParameter("jump", "the key has no versions")
    return found


# --- time travel through a key's operations ----------------------------------------------------


@dataclass(frozen=True)
class Steps:
    back: datetime | None  # as of just before the last operation at or before now/as_of
    back_label: str
    forward: datetime | None  # as of just after the next operation after as_of
    forward_label: str


def _label(op: dict[str, Any]) -> str:
    return f"{op['type']} #{op['id']}"


def _between(cell: Cell, as_of: datetime) -> Q:
    """The operations of the key committed between the newest version created by ``as_of``
    and the first created after it (found on (cell, created_at)): the stretch of op_key_idx
    that holds the operations around ``as_of``, whatever the length of the history."""
    before = (Version.objects.filter(cell=cell, created_at__lte=as_of)
              .order_by("-created_at", "-id").values_list("created_by", flat=True).first())
    after = (Version.objects.filter(cell=cell, created_at__gt=as_of)
             .order_by("created_at", "id").values_list("created_by", flat=True).first())
    q = Q(namespace_id=cell.namespace_id, key=cell.key)
    if before:
        q &= Q(id__gte=before)
    if after:
        q &= Q(id__lte=after)
    return q


def _commit_of(newest: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Of the key's newest operations (newest first), the first of the newest commit:
    operations committed together (a revoke and the reinstatement it causes) are one step."""
    if not newest:
        return None
    at = newest[0]["created_at"]
    return min((o for o in newest if o["created_at"] == at), key=lambda o: o["id"])


def op_steps(*, cell: Cell, as_of: datetime | None) -> Steps:
    """The step back / forward of the as-of control: one commit of the key's operations at a
    time (support noops are not steps: they change no belief). Every statement is a LIMITed
    walk of op_key_idx between two of the key's versions, or an index probe."""
    ops: Any = Operation.objects.exclude(type=OpType.NOOP).values("id", "type", "created_at")
    mine = ops.filter(namespace_id=cell.namespace_id, key=cell.key)
    if as_of is None:
        last = _commit_of(list(mine.order_by("-id")[:STEP_WALK]))
        return Steps(last["created_at"] - TICK if last else None, _label(last) if last else "",
                     None, "")
    around = ops.filter(_between(cell, as_of))
    last = _commit_of(list(around.filter(created_at__lte=as_of).order_by("-id")[:STEP_WALK]))
    nxt = around.filter(created_at__gt=as_of).order_by("id").first()
    if nxt is None:  # past the last version's creation: the operations after it
        later = mine.filter(created_at__gt=as_of)
        nxt = (later if last is None else later.filter(id__gt=last["id"])).order_by("id").first()
    return Steps(last["created_at"] - TICK if last else None, _label(last) if last else "",
                 nxt["created_at"] if nxt else None, _label(nxt) if nxt else "")
