"""Single versions of a key: why one exists (its provenance), the versions a retraction or a
Restore may name, two versions side by side, and the whole history as an export streams it.

Every read is an index probe or a LIMITed index range ((cell, ordinal), (cell, status), the
operation's version), never a scan of the history.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import F
from django.db.models.functions import Left, Length

from memory.domain import (
    BIGINT_MAX,
    HEAD_STATUSES,
    RESTORABLE_STATUSES,
    BadParameter,
    OpType,
    Status,
)
from memory.domain.metadata import Metadata
from memory.domain.wording import plain_reason
from memory.models import Cell, Namespace, Operation, SupportEdge, Tombstone, Version

from .history import history_page
from .shapes import EXPORT_CHUNK, GRAPH_TEXT_CHARS, LIST_TEXT_CHARS, evidence_heads

#: Operations an expanded history row lists (a version polled every minute gathers thousands
#: of support operations; the log has them all).
PROVENANCE_OPS = 30
PROVENANCE_SUPPORTERS = 5
#: Versions the retract form offers at once.
CHOICES = 12
#: Retracted or rejected versions the cell page offers to restore (the newest; the history's
#: rows link to the rest).
RESTORABLE = 10
_ORDINAL = re.compile(r"^v\s*(\d{1,12})$", re.IGNORECASE)
_GLOBAL_ID = re.compile(r"^(?:id\s*|#)(\d{1,18})$", re.IGNORECASE)
_BARE = re.compile(r"^\d{1,12}$")


def id_shaped(text: str) -> bool:
    """True when ``text`` is written as a version (``v12``, ``12``) or an id (``id 345``)."""
    return bool(_ORDINAL.match(text) or _BARE.match(text) or _GLOBAL_ID.match(text))


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
                   "created_by", "created_at", "expires_at").first())
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


def version_choices(*, cell: Cell, search: str = "",
                    limit: int = CHOICES) -> tuple[list[dict[str, Any]], bool] | None:
    """Versions a retraction may name (not revoked yet), newest first: the newest ``limit``
    (a LIMITed backward walk of (cell, ordinal)), or the one ``search`` names (``v12``,
    ``id 345``). None when ``search`` is text to look for in values (the history's value
    search does that: :func:`explorer.cell_page.retract_choices`)."""
    qs = Version.objects.filter(cell=cell).exclude(status=Status.REVOKED)
    text = search.strip()
    if text:
        if not id_shaped(text):
            return None
        qs = qs.filter(pk=named_version(cell, text) or 0)
    rows = list(qs.order_by("-ordinal").values("id", "ordinal", "value", "status")[:limit + 1])
    return ([{"version": r["id"], "ordinal": r["ordinal"], "value": r["value"],
              "status": r["status"]} for r in rows[:limit]], len(rows) > limit)


def restorable_versions(*, cell: Cell, limit: int = RESTORABLE) -> list[dict[str, Any]]:
    """The newest revoked or contradicted versions (what a Restore can bring back), newest
    first, each with when it was made and why it was retracted (:func:`retraction_notes`):
    version_cell_status_idx finds them, whatever the length of the history. Three statements."""
    rows = (Version.objects.filter(cell=cell, status__in=list(RESTORABLE_STATUSES))
            .order_by("-id").values("id", "ordinal", "value", "status", "created_at")[:limit])
    notes = retraction_notes([r["id"] for r in rows])
    return [{"version": r["id"], "ordinal": r["ordinal"], "value": r["value"],
             "status": r["status"], "created_at": r["created_at"],
             "retraction": notes.get(r["id"])} for r in rows]


def retraction_notes(ids: Iterable[int], *, as_of: datetime | None = None
                     ) -> dict[int, dict[str, Any]]:
    """``id -> {op, actor, reason, reason_words, at}``: who retracted each version named and
    why, by ``as_of``. A revoked version's newest tombstone names its operation; a version
    contradicted by a rejection is superseded by the correction that operation made (a
    resolve's losers carry no such link and get no note). Two statements on indexed keys."""
    wanted = sorted({i for i in ids if isinstance(i, int)})
    if not wanted:
        return {}
    fields = {"op": F("operation__type"), "actor": F("operation__actor"),
              "reason": F("operation__reason"), "at": F("operation__created_at")}
    tombs = Tombstone.objects.filter(version_id__in=wanted)
    if as_of is not None:
        tombs = tombs.filter(created_at__lte=as_of)
    notes: dict[int, dict[str, Any]] = {}
    for row in tombs.order_by("version_id", "-id").distinct("version_id").values(
            "version_id", **fields):
        found: dict[str, Any] = dict(row)
        notes[found.pop("version_id")] = found
    rest = [i for i in wanted if i not in notes]
    if rest:
        fixes = Version.objects.filter(supersedes_id__in=rest, created_by__type=OpType.REJECT)
        if as_of is not None:
            fixes = fixes.filter(created_at__lte=as_of)
        for fix in fixes.order_by("supersedes_id", "-id").distinct("supersedes_id").values(
                "supersedes_id", op=F("created_by__type"), actor=F("created_by__actor"),
                reason=F("created_by__reason"), at=F("created_by__created_at")):
            fixed: dict[str, Any] = dict(fix)
            notes[fixed.pop("supersedes_id")] = fixed
    for note in notes.values():
        note["reason_words"] = plain_reason(note["reason"])
    return notes


def retract_choices(cell: Cell, search: str) -> tuple[list[dict[str, Any]], bool]:
    """The retract form's choices: the newest versions, the one named, or those whose value
    matches ``search`` (the history's indexed value search), never a revoked one; and whether
    there are more."""
    named = version_choices(cell=cell, search=search)
    if named is not None:
        return named
    try:
        page = history_page(cell, before=None, limit=2 * CHOICES, as_of=None, search=search)
    except BadParameter:
        return [], False
    rows = [e.as_dict() for e in page.entries if e.status != Status.REVOKED]
    return rows[:CHOICES], page.total > CHOICES


def named_version(cell: Cell, text: str) -> int | None:
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


def version_side(*, namespace: Namespace, key: str, version_id: int) -> dict[str, Any] | None:
    """One version of ``key`` for the side-by-side comparison: value, status, validity,
    support, the operation that made it (actor, method, reason) and its evidence."""
    version = (Version.objects.filter(pk=version_id, cell__namespace=namespace, cell__key=key)
               .select_related("created_by", "supersedes", "restores").first())
    if version is None:
        return None
    evidence = list(SupportEdge.objects.filter(version=version, evidence__isnull=False)
                    .values("evidence_id", "evidence__seq", "evidence__source",
                            text=Left("evidence__text", LIST_TEXT_CHARS)).order_by("evidence__seq"))
    op = version.created_by
    return {"version": version, "evidence": evidence, "operation": op,
            "reason_words": plain_reason(op.reason) if op else "",
            "retraction": (retraction_notes([version.pk]).get(version.pk)
                           if version.status in RESTORABLE_STATUSES else None),
            "head": version.status in HEAD_STATUSES}


def version_by_name(cell: Cell, text: str) -> int | None:
    """The id of the version of ``cell`` that ``vN`` (or ``N``) names; None when none does.
    One probe of (cell, ordinal)."""
    text = text.strip().lower().removeprefix("v")
    if not (text.isascii() and text.isdigit() and len(text) < 12):
        return None
    found: int | None = (Version.objects.filter(cell=cell, ordinal=int(text))
                         .values_list("id", flat=True).first())
    return found


HISTORY_FIELDS = ("version", "value", "status", "valid_from", "valid_to", "support",
                  "supersedes", "restores", "created_by_operation")


def history_rows(*, cell: Cell) -> Iterator[tuple[Any, ...]]:
    """Every version of ``cell``, newest first, streamed from a server-side cursor."""
    return (Version.objects.filter(cell=cell).order_by("-id")
            .values_list("id", "value", "status", "valid_from", "valid_to", "support",
                         "supersedes_id", "restores_id", "created_by_id")
            .iterator(chunk_size=EXPORT_CHUNK))


def version_details(ids: Iterable[int | None],
                    ) -> dict[int, tuple[int, Metadata | None, datetime | None]]:
    """``id -> (ordinal, metadata, expires_at)`` of the versions named (ids of no version are
    left out). One statement on the primary key."""
    wanted = sorted({i for i in ids if isinstance(i, int)})
    if not wanted:
        return {}
    return {vid: (ordinal, metadata, expires_at) for vid, ordinal, metadata, expires_at in
            Version.objects.filter(pk__in=wanted).values_list("id", "ordinal", "metadata",
                                                              "expires_at")}
