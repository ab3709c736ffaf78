"""Typed results of the P-Mem API (CONTRACT "HTTP API"), parsed from its JSON.

Each result keeps the answer it came from in ``raw`` (fields a newer server adds are there
before this client names them). :func:`to_json` turns any of them back into plain JSON.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _meta(value: Any) -> dict[str, Any] | None:
    return dict(value) if isinstance(value, dict) and value else None


def to_json(value: Any) -> Any:
    """A result as plain JSON (dicts, lists, ISO-8601 times), without the ``raw`` copies."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)
                if f.name != "raw"}
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class Whoami:
    """The token's namespace, scope (``read``, ``write`` or ``review``), client name, and the
    trusted sources it may name (SPEC §8; empty from a server that predates them). An
    application token has no namespace (``""``) but a ``namespace_prefix``: it reaches every
    namespace whose name starts with it."""

    namespace: str
    scope: str
    client: str
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    sources: tuple[str, ...] = ()
    namespace_prefix: str = ""

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Whoami:
        return cls(namespace=str(body.get("namespace") or ""), scope=str(body.get("scope", "")),
                   client=str(body.get("client", "")), raw=body,
                   sources=tuple(str(s) for s in body.get("sources") or ()),
                   namespace_prefix=str(body.get("namespace_prefix") or ""))


@dataclass(frozen=True)
class ObservationOperation:
    """One operation an observation produced. ``op`` is what happened (``noop`` when it was
    refused or changed nothing), ``requested`` what was asked, ``status`` the version's
    status afterwards (``active``, ``contested``, ``superseded``, ``retracted`` …)."""

    op: str
    requested: str
    key: str
    value: str | None
    version: int | None
    status: str | None
    reason: str
    actor: str
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    #: How it was decided (explicit, client, rule, model, identity, reinstate) and the evidence's
    #: source (SPEC §3); empty from a server that predates them.
    method: str = ""
    source: str = ""
    #: The version's position in its key's history (the explorer's vN); None: no version.
    ordinal: int | None = None

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> ObservationOperation:
        return cls(op=str(body.get("op", "")), requested=str(body.get("requested") or
                                                             body.get("op", "")),
                   key=str(body.get("key", "")), value=_str(body.get("value")),
                   version=_int(body.get("version")), status=_str(body.get("status")),
                   reason=str(body.get("reason") or ""), actor=str(body.get("actor") or ""),
                   raw=body, method=str(body.get("method") or ""),
                   source=str(body.get("source") or ""), ordinal=_int(body.get("ordinal")))


@dataclass(frozen=True)
class Observation:
    """An observation (evidence) and, once committed, the operations it produced. ``status``
    is ``pending``, ``processing``, ``committed`` or ``failed``; an answer given before the
    commit carries only ``id``, ``seq`` and ``status``. ``replayed`` is True when an
    idempotency key matched an earlier observation (nothing new was stored)."""

    id: int
    seq: int | None
    status: str
    error: str = ""
    text: str = ""
    facts: list[dict[str, Any]] | None = None
    source: str = ""
    observed_at: datetime | None = None
    received_at: datetime | None = None
    committed_at: datetime | None = None
    operations: list[ObservationOperation] = field(default_factory=list)
    cost: dict[str, int] = field(default_factory=dict)
    replayed: bool = False
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    #: How many facts it yielded (None before extraction), and a note in words when a
    #: committed observation yielded none.
    facts_found: int | None = None
    note: str = ""
    #: The chat session it was sent as (its ``text`` is their transcript), else None.
    messages: list[dict[str, Any]] | None = None

    @property
    def settled(self) -> bool:
        return self.status in ("committed", "failed")

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Observation:
        return cls(
            id=int(body["id"]), seq=_int(body.get("seq")), status=str(body.get("status", "")),
            error=str(body.get("error") or ""), text=str(body.get("text") or ""),
            facts=body.get("facts"), source=str(body.get("source") or ""),
            observed_at=_time(body.get("observed_at")),
            received_at=_time(body.get("received_at")),
            committed_at=_time(body.get("committed_at")),
            operations=[ObservationOperation.from_json(o) for o in body.get("operations") or []],
            cost=dict(body.get("cost") or {}), replayed=bool(body.get("replayed")), raw=body,
            facts_found=_int(body.get("facts_found")), note=str(body.get("note") or ""),
            messages=body.get("messages"))


@dataclass(frozen=True)
class Alternative:
    """A value held open beside the head of a contested cell."""

    version: int
    value: str
    support: int
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    ordinal: int | None = None
    metadata: dict[str, Any] | None = None
    #: From this instant the version is never current (None: never).
    expires_at: datetime | None = None

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Alternative:
        return cls(version=int(body["version"]), value=str(body.get("value", "")),
                   support=int(body.get("support") or 0), raw=body,
                   ordinal=_int(body.get("ordinal")), metadata=_meta(body.get("metadata")),
                   expires_at=_time(body.get("expires_at")))


@dataclass(frozen=True)
class HistoryEntry:
    """One version of a key: its value, status and when it held (``valid_to`` None: still),
    its position in the history (``ordinal``, the explorer's vN) and the ``metadata`` of the
    fact that created it."""

    version: int
    value: str
    status: str
    valid_from: datetime | None
    valid_to: datetime | None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    ordinal: int | None = None
    metadata: dict[str, Any] | None = None
    #: From this instant the version is never current (None: never).
    expires_at: datetime | None = None

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> HistoryEntry:
        return cls(version=int(body["version"]), value=str(body.get("value", "")),
                   status=str(body.get("status", "")), valid_from=_time(body.get("valid_from")),
                   valid_to=_time(body.get("valid_to")), raw=body,
                   ordinal=_int(body.get("ordinal")), metadata=_meta(body.get("metadata")),
                   expires_at=_time(body.get("expires_at")))


@dataclass(frozen=True)
class HistoryPage:
    """History entries newest first; ``next`` is the cursor of the following page (None at
    the end), ``total`` how many versions the key has."""

    results: list[HistoryEntry]
    next: str | None
    total: int | None


@dataclass(frozen=True)
class Cell:
    """A key's current state: ``status`` ``active`` (one value), ``contested`` (``value`` and
    the ``alternatives`` are held open until resolved) or ``empty`` (everything retracted)."""

    key: str
    value: str | None
    status: str
    version: int | None
    support: int
    alternatives: list[Alternative]
    history: list[HistoryEntry]
    aliases: list[str]
    history_total: int | None = None
    history_next: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    #: The head's position in the history (vN) and its fact's metadata.
    ordinal: int | None = None
    metadata: dict[str, Any] | None = None
    #: From this instant the current value is never current (None: never).
    expires_at: datetime | None = None

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Cell:
        history = [HistoryEntry.from_json(h) for h in body.get("history") or []]
        return cls(
            key=str(body.get("key", "")), value=_str(body.get("value")),
            status=str(body.get("status", "")), version=_int(body.get("version")),
            support=int(body.get("support") or 0),
            alternatives=[Alternative.from_json(a) for a in body.get("alternatives") or []],
            history=history, aliases=[str(a) for a in body.get("aliases") or []],
            history_total=_int(body.get("history_total")),
            history_next=_str(body.get("history_next")), raw=body,
            ordinal=_int(body.get("ordinal")), metadata=_meta(body.get("metadata")),
            expires_at=_time(body.get("expires_at")))


@dataclass(frozen=True)
class Operation:
    """One entry of the operation log: who (``actor``) did what to which key, and why."""

    id: int
    op: str
    requested: str
    key: str
    value: str | None
    version: int | None
    actor: str
    reason: str
    seq: int | None
    observation: int | None
    created_at: datetime | None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    method: str = ""  # SPEC §3: how it was decided
    source: str = ""  # the evidence's source
    ordinal: int | None = None  # the version's position in its key's history (vN)

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Operation:
        return cls(id=int(body["id"]), op=str(body.get("op", "")),
                   requested=str(body.get("requested") or body.get("op", "")),
                   key=str(body.get("key", "")), value=_str(body.get("value")),
                   version=_int(body.get("version")), actor=str(body.get("actor") or ""),
                   reason=str(body.get("reason") or ""), seq=_int(body.get("seq")),
                   observation=_int(body.get("observation")),
                   created_at=_time(body.get("created_at")), raw=body,
                   method=str(body.get("method") or ""), source=str(body.get("source") or ""),
                   ordinal=_int(body.get("ordinal")))


@dataclass(frozen=True)
class ChangeVersion:
    """A version an event names beside its own: the head it displaced, the head after it."""

    version: int
    ordinal: int | None
    value: str

    @classmethod
    def from_json(cls, body: Any) -> ChangeVersion | None:
        if not isinstance(body, dict) or _int(body.get("version")) is None:
            return None
        return cls(int(body["version"]), _int(body.get("ordinal")), str(body.get("value", "")))


@dataclass(frozen=True)
class ChangeEvent:
    """One committed operation of the change feed (SPEC §12), in commit order by ``cursor``:
    what happened (``op``: also ``reinstate``, ``expire``, ``erase``) to which key, the version
    made or touched, the value it displaced (``previous``), the statuses after it, who asked,
    how it was decided, and the cell's head after it (``head``: replaying the feed rebuilds
    the frontier)."""

    cursor: int
    op: str
    key: str
    version: int | None
    ordinal: int | None
    value: str | None
    previous: ChangeVersion | None
    status: str
    cell_status: str
    actor: str
    method: str
    source: str
    reason: str
    observation: int | None
    committed_at: datetime | None
    head: ChangeVersion | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> ChangeEvent:
        return cls(cursor=int(body["cursor"]), op=str(body.get("op", "")),
                   key=str(body.get("key") or ""), version=_int(body.get("version")),
                   ordinal=_int(body.get("ordinal")), value=_str(body.get("value")),
                   previous=ChangeVersion.from_json(body.get("previous")),
                   status=str(body.get("status") or ""),
                   cell_status=str(body.get("cell_status") or ""),
                   actor=str(body.get("actor") or ""), method=str(body.get("method") or ""),
                   source=str(body.get("source") or ""), reason=str(body.get("reason") or ""),
                   observation=_int(body.get("observation")),
                   committed_at=_time(body.get("committed_at")),
                   head=ChangeVersion.from_json(body.get("head")), raw=body)


@dataclass(frozen=True)
class OperationResult:
    """What ``retract``, ``contest``, ``resolve``, ``accept``, ``reject`` and ``restore`` give
    back: the operation as recorded, the cell after it, and the observation that carried it
    (None for ``restore``, a reviewer's operation on the cell itself)."""

    operation: ObservationOperation
    cell: Cell | None
    observation: Observation | None


@dataclass(frozen=True)
class ReadResult:
    """A read for a query: ``context`` is the text to put in a prompt, ``items`` its parts."""

    mode: str
    context: str
    items: list[dict[str, Any]]
    context_chars: int
    note: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> ReadResult:
        context = str(body.get("context") or "")
        return cls(mode=str(body.get("mode", "")), context=context,
                   items=list(body.get("items") or []),
                   context_chars=int(body.get("context_chars") or len(context)),
                   note=str(body.get("note") or ""), raw=body)


@dataclass(frozen=True)
class AnswerResult:
    """A model's answer to a query from a read's context (``POST answer/``): ``answer``, the
    ``context`` it read, the ``lookups`` of the iterative mode and what it cost."""

    answer: str
    mode: str
    context: str
    context_chars: int
    lookups: list[dict[str, Any]]
    error: str | None
    cost: dict[str, int]
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> AnswerResult:
        context = str(body.get("context") or "")
        return cls(answer=str(body.get("answer") or ""), mode=str(body.get("mode", "")),
                   context=context,
                   context_chars=int(body.get("context_chars") or len(context)),
                   lookups=list(body.get("lookups") or []), error=body.get("error"),
                   cost=dict(body.get("cost") or {}), raw=body)


@dataclass(frozen=True)
class EraseReport:
    """After a privacy erase with ``report=True``: where else the erased values still appear."""

    key: str
    redacted_evidence: int
    mentions: list[dict[str, Any]]
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> EraseReport:
        return cls(key=str(body.get("key", "")),
                   redacted_evidence=int(body.get("redacted_evidence") or 0),
                   mentions=list(body.get("mentions") or []), raw=body)


@dataclass(frozen=True)
class NamespaceInfo:
    """A namespace the token reaches: how many keys it holds, when it was made and last
    written (None: never)."""

    name: str
    cells: int
    created_at: datetime | None
    last_write_at: datetime | None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> NamespaceInfo:
        return cls(name=str(body.get("name", "")), cells=int(body.get("cells") or 0),
                   created_at=_time(body.get("created_at")),
                   last_write_at=_time(body.get("last_write_at")), raw=body)


@dataclass(frozen=True)
class NamespaceDeleted:
    """After a namespace's deletion with ``report=True``: what it held, and the digest of its
    name the audit keeps."""

    name_digest: str
    counts: dict[str, int]
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> NamespaceDeleted:
        return cls(name_digest=str(body.get("name_digest", "")),
                   counts={str(k): int(v) for k, v in (body.get("counts") or {}).items()},
                   raw=body)
