"""The client's logic without I/O: what each capability asks of the API and how the answers
become results, written once for :class:`~pmem_client.Client` and
:class:`~pmem_client.AsyncClient`.

A capability is a generator: it yields :class:`Call` s, receives each one's :class:`Reply`
(or has the error thrown into it), and returns its result. The two clients only differ in
how they send a call and sleep between retries.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Generator
from dataclasses import dataclass, replace
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

from . import errors
from ._batch import batch_item, batches, messages_body
from ._batch import new_idempotency_key as new_idempotency_key  # the clients make keys
from ._urls import API, as_of_text, cell_path, ns_path, params, rebase
from .types import (
    AnswerResult,
    Cell,
    EraseReport,
    HistoryEntry,
    HistoryPage,
    NamespaceDeleted,
    Observation,
    ObservationOperation,
    Operation,
    OperationResult,
    ReadResult,
    Whoami,
)

T = TypeVar("T")


@dataclass(frozen=True)
class Call:
    """One HTTP request: ``url`` relative to the server root, or absolute (a ``next`` link)."""

    method: str
    url: str
    params: dict[str, str] | None = None
    json: Any = None


@dataclass(frozen=True)
class Reply:
    status: int
    body: Any  # the parsed JSON, or None for an empty answer (204)


@dataclass(frozen=True)
class Pause:
    """Yielded like a call: the driver sleeps this long and resumes the capability (a poll)."""

    seconds: float


Steps = Generator[Call | Pause, Reply, T]


# --- retries ---------------------------------------------------------------------------------

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True)
class Retry:
    """How often and how long to retry a 429, a 5xx, a timeout or a broken connection.

    ``attempts`` counts every try (1: never retry). Between tries the client waits the
    server's ``Retry-After`` when it sends one (up to ``max_retry_after``), else an
    exponential backoff from ``backoff`` seconds, capped at ``max_backoff``, with jitter so
    that many clients refused at once do not come back at once. Every call is safe to retry:
    reads change nothing, and each write carries an idempotency key (``remember`` and the
    explicit operations) or is an erase, which a retry cannot apply twice."""

    attempts: int = 4
    backoff: float = 0.25
    max_backoff: float = 8.0
    max_retry_after: float = 60.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after)
        base = min(self.backoff * 2 ** (attempt - 1), self.max_backoff)
        return base * random.uniform(0.5, 1.0)


def retry_after_seconds(header: str | None, now: datetime | None = None) -> float | None:
    """``Retry-After`` as seconds: delta-seconds or an HTTP date (RFC 9110 §10.2.3)."""
    if not header:
        return None
    header = header.strip()
    try:
        return max(float(header), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(header)
    except (TypeError, ValueError):
        return None
    now = now or datetime.now(when.tzinfo)
    return max((when - now).total_seconds(), 0.0)


def parse_body(content: bytes, content_type: str) -> Any:
    import json

    if not content:
        return None
    if "json" in content_type:
        try:
            return json.loads(content)
        except ValueError:
            pass
    return content.decode("utf-8", "replace")


# --- URLs: pmem_client._urls -----------------------------------------------------------------

_ns, _cell, _params, _as_of = ns_path, cell_path, params, as_of_text


# --- capabilities -----------------------------------------------------------------------------


def whoami() -> Steps[Whoami]:
    reply = yield Call("GET", f"{API}whoami/")
    return Whoami.from_json(reply.body)


def observe(namespace: str, *, text: str | None, facts: list[dict[str, Any]] | None,
            source: str | None, observed_at: str | datetime | None, wait: bool,
            idempotency_key: str,
            messages: list[dict[str, Any]] | None = None) -> Steps[Observation]:
    body: dict[str, Any] = {"idempotency_key": idempotency_key}
    if text is not None:
        body["text"] = text
    if messages is not None:
        body["messages"] = messages_body(messages)
    if facts is not None:
        body["facts"] = facts
    if source is not None:
        body["source"] = source
    if observed_at is not None:
        body["observed_at"] = _as_of(observed_at)
    reply = yield Call("POST", f"{_ns(namespace)}observations/",
                       params={"wait": "1" if wait else "0"}, json=body)
    return Observation.from_json(reply.body)


def with_expiry(facts: list[dict[str, Any]] | None, ttl: int | None,
                expires_at: str | datetime | None) -> list[dict[str, Any]] | None:
    """Each fact with ``ttl`` (seconds) or ``expires_at`` unless it carries its own expiry."""
    if ttl is None and expires_at is None:
        return facts
    if ttl is not None and expires_at is not None:
        raise ValueError("give ttl or expires_at, not both")
    if not facts:
        raise ValueError("ttl and expires_at apply to facts: pass facts=[...]")
    extra = {"ttl": int(ttl)} if ttl is not None else {"expires_at": _as_of(expires_at)}
    return [f if ("ttl" in f or "expires_at" in f) else {**f, **extra} for f in facts]


def remember(namespace: str, *, text: str | None, facts: list[dict[str, Any]] | None,
             source: str | None, observed_at: str | datetime | None, wait: bool,
             idempotency_key: str, wait_timeout: float,
             messages: list[dict[str, Any]] | None = None) -> Steps[Observation]:
    """Record an observation; with ``wait``, until it is committed or failed (or
    ``wait_timeout`` seconds of polling after the server's own wait went by)."""
    recorded = yield from observe(namespace, text=text, facts=facts, source=source,
                                  observed_at=observed_at, wait=wait,
                                  idempotency_key=idempotency_key, messages=messages)
    if not wait:
        return recorded
    return (yield from until_settled(namespace, recorded, wait_timeout))


def remember_many(namespace: str, items: list[dict[str, Any]], *, wait: bool,
                  wait_timeout: float) -> Steps[list[Observation]]:
    """Record ``items`` in order, one batch request per chunk; each chunk is stored whole or
    not at all. With ``wait``, each chunk is committed before the next is sent: a chunk the
    server's own wait left unsettled is sent again (its items replay, storing nothing) until
    it settles or ``wait_timeout`` seconds went by."""
    out: list[Observation] = []
    for chunk in batches([batch_item(i) for i in items]):
        url = f"{_ns(namespace)}observations/batch/"
        params = {"wait": "1" if wait else "0"}
        reply = yield Call("POST", url, params=params, json={"observations": chunk})
        results = [Observation.from_json(r) for r in reply.body["results"]]
        waited, delay = 0.0, 0.5
        while wait and not all(r.settled for r in results) and waited < wait_timeout:
            yield Pause(delay)
            waited += delay
            delay = min(delay * 1.5, 5.0)
            again = yield Call("POST", url, params=params, json={"observations": chunk})
            # Whether an item was new is the first answer's; its status the latest one's.
            results = [replace(Observation.from_json(r), replayed=first.replayed)
                       for r, first in zip(again.body["results"], results, strict=True)]
        out += results
    return out


def observation(namespace: str, observation_id: int) -> Steps[Observation]:
    reply = yield Call("GET", f"{_ns(namespace)}observations/{int(observation_id)}/")
    return Observation.from_json(reply.body)


def answer(namespace: str, *, query: str, mode: str, k: int | None,
           disclose: list[str] | None) -> Steps[AnswerResult]:
    """The server's model answers ``query`` from a read in ``mode``; a server without a model
    answers 409 (:class:`~pmem_client.errors.Conflict`)."""
    body: dict[str, Any] = {"query": query, "mode": mode}
    if k is not None:
        body["k"] = k
    if disclose is not None:
        body["disclose"] = list(disclose)
    reply = yield Call("POST", f"{_ns(namespace)}answer/", json=body)
    return AnswerResult.from_json(reply.body)


def recall(namespace: str, *, query: str, mode: str, k: int | None,
           as_of: str | datetime | None, disclose: list[str] | None,
           filter: dict[str, Any] | None = None,
           min_score: float | None = None) -> Steps[ReadResult]:
    body: dict[str, Any] = {"query": query, "mode": mode}
    if k is not None:
        body["k"] = k
    if as_of is not None:
        body["as_of"] = _as_of(as_of)
    if disclose is not None:
        body["disclose"] = list(disclose)
    if filter:
        body["filter"] = dict(filter)
    if min_score is not None:
        body["min_score"] = min_score
    reply = yield Call("POST", f"{_ns(namespace)}read/", json=body)
    return ReadResult.from_json(reply.body)


def get_fact(namespace: str, key: str, *, as_of: str | datetime | None,
             history: int | None) -> Steps[Cell]:
    reply = yield Call("GET", _cell(namespace, key),
                       params=_params(as_of=_as_of(as_of), history=history) or None)
    return Cell.from_json(reply.body)


def fact_history(namespace: str, key: str, *, limit: int, before: str | None,
                 as_of: str | datetime | None, search: str | None) -> Steps[HistoryPage]:
    """The first page comes with the cell (``?history=limit``); the following ones from the
    history endpoint, by cursor. A server that does not page history (no ``history_total`` in
    the cell) gives it whole, in one page."""
    if before is None and search is None:
        reply = yield Call("GET", _cell(namespace, key),
                           params=_params(history=limit, as_of=_as_of(as_of)))
        cell = Cell.from_json(reply.body)
        if cell.history_total is None:
            return HistoryPage(results=cell.history, next=None, total=len(cell.history))
        return HistoryPage(results=cell.history[:limit], next=cell.history_next,
                           total=cell.history_total)
    reply = yield Call("GET", f"{_cell(namespace, key)}history/",
                       params=_params(before=before, limit=limit, as_of=_as_of(as_of),
                                      search=search))
    body = reply.body
    return HistoryPage(results=[HistoryEntry.from_json(h) for h in body.get("results") or []],
                       next=body.get("next"), total=body.get("total"))


#: The explicit operations an agent sends as observations, by the name of the capability.
EXPLICIT_OPS = {"retract": "revoke", "contest": "contest", "resolve": "resolve",
                "accept": "accept", "reject": "reject"}


def needs_cell(capability: str, value: str | None) -> bool:
    """Is the operation meaningless on a key that has no cell (SPEC §3: retract, contest,
    resolve, and reject without a value need a head)? Such a call is refused with NotFound
    before anything is written."""
    return capability in ("retract", "contest", "resolve") or (
        capability == "reject" and value is None)


def explicit_op(namespace: str, capability: str, *, key: str, value: str | None = None,
                version: int | str | None = None, reason: str | None = None,
                metadata: dict[str, Any] | None = None,
                idempotency_key: str, wait_timeout: float) -> Steps[OperationResult]:
    """An agent's retract / contest / resolve / accept / reject: an observation carrying one
    fact with that explicit op, so it is ordered with the agent's other writes and planned
    against the state they left (SPEC §3, §5). Waits for the commit; an op recorded as
    invalid (a noop) raises :class:`~pmem_client.errors.Conflict` with the reason. An op that
    needs a cell, on a key that has none, raises :class:`~pmem_client.errors.NotFound` and
    writes nothing: the cell is looked up first (a key whose first value is still being
    committed — ``remember(wait=False)`` just before — is not a cell yet)."""
    op = EXPLICIT_OPS[capability]
    if needs_cell(capability, value):
        try:
            yield from get_fact(namespace, key, as_of=None, history=0)
        except errors.NotFound as missing:
            raise errors.NotFound(f"no cell with key {key!r}: nothing to {capability} "
                                  f"(nothing was written)", status=404,
                                  body=missing.body) from None
    fact: dict[str, Any] = {"key": key, "op": op}
    if value is not None:
        fact["value"] = value
    if version is not None:
        fact["version"] = version
    if reason:
        fact["reason"] = reason
    if metadata:
        fact["metadata"] = dict(metadata)
    recorded = yield from observe(namespace, text=None, facts=[fact], source=None,
                                  observed_at=None, wait=True, idempotency_key=idempotency_key)
    settled = yield from until_settled(namespace, recorded, wait_timeout)
    done = _settled_or_raise(settled)
    operation = next((o for o in done.operations if o.requested == op and o.op != "reinstate"),
                     None)
    if operation is None:
        raise errors.ServerError(f"observation {done.id} recorded no {op} operation",
                                 status=500, body=done.raw)
    if operation.op == "noop":
        raise errors.Conflict(operation.reason or f"{op} changed nothing", status=409,
                              body=done.raw, observation=done)
    try:
        cell = yield from get_fact(namespace, operation.key, as_of=None, history=None)
    except errors.NotFound:
        cell = None  # erased since: the operation stands, the cell is gone
    return OperationResult(operation=operation, cell=cell, observation=done)


def _settled_or_raise(observation: Observation) -> Observation:
    if observation.status == "failed":
        raise errors.ObservationFailed(observation)
    if observation.status != "committed":
        raise errors.Timeout(f"observation {observation.id} is still {observation.status}; "
                             f"ask for it again later", observation=observation)
    return observation


def until_settled(namespace: str, recorded: Observation,
                  timeout: float) -> Steps[Observation]:
    """Poll an observation a ``wait=1`` answer left unsettled (the server waits 30 s at
    most) until it is committed or failed, or ``timeout`` seconds of polling went by."""
    waited, delay = 0.0, 0.2
    while not recorded.settled and waited < timeout:
        yield Pause(delay)
        waited += delay
        delay = min(delay * 1.5, 2.0)
        polled = yield from observation(namespace, recorded.id)
        # The poll reads the observation; whether this call replayed it is the first answer's.
        recorded = replace(polled, replayed=recorded.replayed)
    return recorded


def restore(namespace: str, key: str, *, version: int | str, reason: str | None,
            metadata: dict[str, Any] | None = None) -> Steps[OperationResult]:
    """A reviewer's restore (SPEC §3: the undo of a retraction or rejection), through the
    cell-operations endpoint (scope ``review``); a 409 raises Conflict with the reason.
    ``version``: its id or the key's ordinal as ``"v3"``."""
    body: dict[str, Any] = {"op": "restore", "version": version}
    if reason:
        body["reason"] = reason
    if metadata:
        body["metadata"] = metadata
    reply = yield Call("POST", f"{_cell(namespace, key)}operations/", json=body)
    cell = reply.body.get("cell")
    return OperationResult(operation=ObservationOperation.from_json(reply.body["operation"]),
                           cell=Cell.from_json(cell) if cell else None, observation=None)


def delete_namespace(namespace: str, *, report: bool) -> Steps[NamespaceDeleted | None]:
    reply = yield Call("DELETE", _ns(namespace), params={"report": "1"} if report else None)
    if report and isinstance(reply.body, dict):
        return NamespaceDeleted.from_json(reply.body)
    return None


def export(namespace: str) -> Steps[str]:
    """The namespace as NDJSON (what ``pmem_import`` reads), as one string."""
    reply = yield Call("GET", f"{_ns(namespace)}export/")
    body = reply.body
    if isinstance(body, dict | list):  # a one-line document parsed as JSON
        import json

        return json.dumps(body) + "\n"
    return str(body or "")


def namespaces_call(*, limit: int | None) -> Call:
    return Call("GET", f"{API}namespaces/", params=_params(limit=limit))


def erase(namespace: str, key: str, *, report: bool) -> Steps[EraseReport | None]:
    reply = yield Call("DELETE", _cell(namespace, key), params={"report": "1"} if report else None)
    if report and isinstance(reply.body, dict):
        return EraseReport.from_json(reply.body)
    return None


# --- pages -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Page:
    items: list[Any]
    next: Call | None


def page(call: Call, parse: Callable[[dict[str, Any]], Any], base_url: str) -> Steps[Page]:
    reply = yield call
    body = reply.body or {}
    following = body.get("next")
    return Page(items=[parse(item) for item in body.get("results") or []],
                next=Call("GET", rebase(following, base_url)) if following else None)


def cells_call(namespace: str, *, status: str | None, search: str | None,
               as_of: str | datetime | None, limit: int | None,
               filter: dict[str, Any] | None = None) -> Call:
    import json

    return Call("GET", f"{_ns(namespace)}cells/",
                params=_params(status=status, search=search, as_of=_as_of(as_of), limit=limit,
                               filter=json.dumps(filter) if filter else None))


def operations_call(namespace: str, **filters: Any) -> Call:
    return Call("GET", f"{_ns(namespace)}operations/", params=_params(**filters))


PARSE = {"cells": Cell.from_json, "operations": Operation.from_json}
