"""``Client`` and ``AsyncClient``: the P-Mem API for agents and scripts, one method per
capability (CONTRACT "Agents: MCP server and Python client").

Both drive the capabilities of :mod:`pmem_client._protocol` over ``httpx2``; they differ
only in how a request is sent and how a retry waits.

(Over 450 lines on purpose: the two clients are twins, a method of one beside its double in the
other, so a capability added to one is seen missing from the other in the same file.)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from typing import Any, TypeVar

import httpx2

from . import _changes, errors
from . import _protocol as p
from .types import (
    AnswerResult,
    Cell,
    ChangeEvent,
    EraseReport,
    HistoryEntry,
    HistoryPage,
    NamespaceDeleted,
    NamespaceInfo,
    Observation,
    Operation,
    OperationResult,
    ReadResult,
    Whoami,
)

T = TypeVar("T")
#: Failures where the request may not have reached the server, or its answer was lost: retried.
RETRIED_TRANSPORT = (httpx2.TimeoutException, httpx2.NetworkError, httpx2.RemoteProtocolError)
DEFAULT_TIMEOUT = 60.0  # above the server's 30 s wait=1, so a waiting remember is not cut off
WAIT_TIMEOUT = 120.0  # how long remember/retract/... poll an observation the server left pending


class _Base:
    """What both clients share: configuration, the namespace, and the retry decisions."""

    def __init__(self, base_url: str, token: str, *, namespace: str | None,
                 retry: p.Retry | None, channel: str, wait_timeout: float) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError("base_url is the server's root, e.g. http://127.0.0.1:8000")
        self.base_url = base_url.rstrip("/") + "/"
        self.retry = retry or p.Retry()
        self.wait_timeout = wait_timeout
        self._namespace = namespace
        self._prefix = ""  # an application token's, once whoami said so
        self._headers = {"Authorization": f"Token {token}", "Accept": "application/json",
                         "X-Pmem-Channel": channel, "User-Agent": "pmem-client"}

    def _outcome(self, response: httpx2.Response, attempt: int) -> p.Reply | float:
        """The reply, or how long to wait before the next try; raises when it is final."""
        retry_after = p.retry_after_seconds(response.headers.get("retry-after"))
        if response.status_code in p.RETRY_STATUSES and attempt < self.retry.attempts:
            return self.retry.delay(attempt, retry_after)
        body = p.parse_body(response.content, response.headers.get("content-type", ""))
        if response.status_code >= 400:
            raise errors.error_for(response.status_code, body, retry_after=retry_after)
        return p.Reply(response.status_code, body)

    def _transport_failed(self, exc: Exception, call: p.Call, attempt: int) -> float:
        if attempt < self.retry.attempts:
            return self.retry.delay(attempt)
        what = f"{call.method} {call.url}"
        if isinstance(exc, httpx2.TimeoutException):
            raise errors.Timeout(f"{what}: no answer after {attempt} tries ({exc})") from exc
        raise errors.TransportError(f"{what}: failed after {attempt} tries ({exc})") from exc

    def _learn(self, who: Whoami) -> Whoami:
        """Remember what ``whoami`` said: the token's namespace, unless one was given."""
        if self._namespace is None and who.namespace:
            self._namespace = who.namespace
        self._prefix = who.namespace_prefix
        return who

    def _require_namespace(self) -> str:
        if self._namespace is not None:
            return self._namespace
        if self._prefix:
            raise errors.PmemError(
                f"this application token reaches the namespaces whose names start with "
                f"{self._prefix!r}: name one (namespace=... on the client or the call)")
        raise errors.PmemError("the namespace is not known yet: use `async with`, await "
                               "whoami() first, or pass namespace=...")

    @staticmethod
    def _request(call: p.Call) -> dict[str, Any]:
        out: dict[str, Any] = {"params": call.params}
        if call.json is not None:
            out["json"] = call.json
        return out


class Client(_Base):
    """The P-Mem API, synchronously. ``base_url`` is the server's root
    (``http://127.0.0.1:8000``); the namespace is ``namespace``, else the token's (asked once,
    from ``whoami``). An application token (``pmem_token create --prefix``) reaches every
    namespace of its prefix: name one on the client or on each call (``namespace=``).

    ``channel`` is the label the server signs this client's writes with (``api:<client>``;
    the MCP server says ``mcp``). ``transport`` replaces the network (an in-process server).
    Use it as a context manager, or call :meth:`close`."""

    def __init__(self, base_url: str, token: str, *, namespace: str | None = None,
                 timeout: float = DEFAULT_TIMEOUT, retry: p.Retry | None = None,
                 channel: str = "api", wait_timeout: float = WAIT_TIMEOUT,
                 transport: httpx2.BaseTransport | None = None) -> None:
        super().__init__(base_url, token, namespace=namespace, retry=retry, channel=channel,
                         wait_timeout=wait_timeout)
        self._http = httpx2.Client(base_url=self.base_url, headers=self._headers,
                                   timeout=timeout, transport=transport)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # --- the driver ------------------------------------------------------------------------

    def _send(self, call: p.Call) -> p.Reply:
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._http.request(call.method, call.url, **self._request(call))
            except RETRIED_TRANSPORT as exc:
                time.sleep(self._transport_failed(exc, call, attempt))
                continue
            outcome = self._outcome(response, attempt)
            if isinstance(outcome, p.Reply):
                return outcome
            time.sleep(outcome)

    def _run(self, steps: p.Steps[T]) -> T:
        try:
            step = next(steps)
            while True:
                if isinstance(step, p.Pause):
                    time.sleep(step.seconds)
                    step = steps.send(p.Reply(200, None))
                    continue
                try:
                    reply = self._send(step)
                except errors.PmemError as exc:
                    step = steps.throw(exc)
                else:
                    step = steps.send(reply)
        except StopIteration as done:
            return done.value

    @property
    def namespace(self) -> str:
        """The namespace calls act on unless they name one: the one given, else the token's
        (asked once, from ``whoami``). An application token has none: name it."""
        if self._namespace is None:
            self.whoami()
        return self._require_namespace()

    def _ns(self, namespace: str | None) -> str:
        return namespace if namespace is not None else self.namespace

    # --- capabilities ------------------------------------------------------------------------

    def whoami(self) -> Whoami:
        """The token's namespace (or an application token's ``namespace_prefix``), scope and
        client name."""
        return self._learn(self._run(p.whoami()))

    def remember(self, text: str | None = None, *, facts: list[dict[str, Any]] | None = None,
                 source: str | None = None, observed_at: str | datetime | None = None,
                 wait: bool = True, idempotency_key: str | None = None,
                 namespace: str | None = None,
                 messages: list[dict[str, Any]] | None = None, ttl: int | None = None,
                 expires_at: str | datetime | None = None) -> Observation:
        """Record an observation: ``text`` and/or ``facts`` (``[{"key", "value", "op"?,
        "annotate"?, "metadata"?, "ttl"?, "expires_at"?}]``; ``ttl`` (seconds) or
        ``expires_at`` here apply to every fact without its own: from then on the version it
        creates is never current; a fact's different value supersedes the current one
        unless ``annotate`` is True, which lets the memory's model decide; ``metadata``, a flat
        object of strings, numbers and booleans, stays with the version the fact creates). Waits until it is committed (its operations then
        say what changed; ``facts_found`` and ``note`` say when text yielded nothing) unless
        ``wait=False``. One idempotency key is made per call (or pass your own), so the
        client's retries never store it twice: a key sent again with the same request answers
        the first observation (``replayed`` True), with another request raises
        :class:`~pmem_client.IdempotencyConflict`. A ``source`` with a trust level must be
        one the token is bound to (:class:`~pmem_client.Forbidden` otherwise); left out, the
        token's own source when it is bound to one. An application token's first write to a
        namespace of its prefix creates it. ``messages`` (``[{"role", "content", "name"?,
        "at"?}]``, at most 500) records a chat session as one observation, read as its
        transcript and extracted in one model call; ``observed_at`` defaults to the last
        ``at`` (a time with a zone)."""
        facts = p.with_expiry(facts, ttl, expires_at)
        return self._run(p.remember(self._ns(namespace), text=text, facts=facts, source=source,
                                    observed_at=observed_at, wait=wait,
                                    idempotency_key=idempotency_key or p.new_idempotency_key(),
                                    wait_timeout=self.wait_timeout, messages=messages))

    def remember_many(self, observations: list[dict[str, Any]], *, wait: bool = True,
                      namespace: str | None = None) -> list[Observation]:
        """Record many observations in order — each a dict of ``remember``'s fields (``text``,
        ``messages``, ``facts``, ``source``, ``observed_at``, ``idempotency_key``) — in
        batch requests of at most 1,000 (a longer list is sent in chunks, in order, each
        stored whole or not at all: a bad item raises BadRequest naming its path, e.g.
        ``observations[57].facts[0].key``, counted within its chunk). Each item without an
        idempotency key gets one, so retries store nothing twice. Returns one result per
        item (``id``, ``seq``, ``status``, ``replayed``); with ``wait`` once committed."""
        return self._run(p.remember_many(self._ns(namespace), observations, wait=wait,
                                         wait_timeout=self.wait_timeout))

    def observation(self, observation_id: int, *, namespace: str | None = None) -> Observation:
        """An observation's status and, once committed, its operations."""
        return self._run(p.observation(self._ns(namespace), observation_id))

    def recall(self, query: str, *, mode: str = "frontier", k: int | None = None,
               as_of: str | datetime | None = None, disclose: list[str] | None = None,
               filter: dict[str, Any] | None = None, min_score: float | None = None,
               namespace: str | None = None) -> ReadResult:
        """Read memory for a query (``frontier``: current values; ``evidence``: the
        observations that best match by meaning and by the query's words; ``raw``,
        ``raw_ordered``, ``pruned``: the evidence by meaning). ``as_of`` reads the memory as it
        was then; ``filter`` (frontier) keeps the facts whose current version's metadata holds
        each entry; ``min_score`` drops items scored below it (each item's ``score``: in
        ``frontier`` the cosine similarity of query and fact plus up to 0.5 for the query's
        exact rare words, -1 to 1.5; in ``evidence`` the cosine plus up to 1 for the query's
        words, -1 to 2, with ``semantic_score`` and ``lexical_score``; otherwise the cosine, -1
        to 1; what is relevant depends on the embedder)."""
        return self._run(p.recall(self._ns(namespace), query=query, mode=mode, k=k,
                                  as_of=as_of, disclose=disclose, filter=filter,
                                  min_score=min_score))

    def answer(self, query: str, *, mode: str = "frontier", k: int | None = None,
               disclose: list[str] | None = None,
               namespace: str | None = None) -> AnswerResult:
        """The server's model answers ``query`` from a read in ``mode`` (``frontier``,
        ``frontier_cosine``, ``raw``, ``raw_ordered``, ``pruned``, ``iterative``); it needs
        a model configured on the server (PMEM_LLM_BASE_URL: Conflict otherwise)."""
        return self._run(p.answer(self._ns(namespace), query=query, mode=mode, k=k,
                                  disclose=disclose))

    def get_fact(self, key: str, *, as_of: str | datetime | None = None,
                 history: int | None = None, namespace: str | None = None) -> Cell:
        """A cell: value, status, alternatives and newest history. Raises NotFound."""
        return self._run(p.get_fact(self._ns(namespace), key, as_of=as_of, history=history))

    def fact_history(self, key: str, *, limit: int = 50, before: str | None = None,
                     as_of: str | datetime | None = None, search: str | None = None,
                     namespace: str | None = None) -> HistoryPage:
        """One page of a key's history, newest first; pass ``page.next`` as ``before``."""
        return self._run(p.fact_history(self._ns(namespace), key, limit=limit, before=before,
                                        as_of=as_of, search=search))

    def iter_history(self, key: str, *, as_of: str | datetime | None = None,
                     page_size: int = 200, namespace: str | None = None
                     ) -> Iterator[HistoryEntry]:
        """Every version of a key, newest first, page by page."""
        before: str | None = None
        while True:
            page = self.fact_history(key, limit=page_size, before=before, as_of=as_of,
                                     namespace=namespace)
            yield from page.results
            if not page.next:
                return
            before = page.next

    def retract(self, key: str, reason: str, *, version: int | str | None = None,
                idempotency_key: str | None = None,
                namespace: str | None = None) -> OperationResult:
        """Retract the key's current value (or the non-head ``version``: its id, or the key's
        ordinal as ``"v3"``): the previous value is reinstated. Raises Conflict with the reason when it is invalid in the cell's state,
        NotFound (nothing written) when the key has no cell."""
        return self._explicit("retract", namespace, key=key, reason=reason, version=version,
                              idempotency_key=idempotency_key)

    def contest(self, key: str, value: str, *, reason: str | None = None,
                idempotency_key: str | None = None, metadata: dict[str, Any] | None = None,
                namespace: str | None = None) -> OperationResult:
        """Hold ``value`` open beside the current one: the cell becomes contested."""
        return self._explicit("contest", namespace, key=key, value=value, reason=reason,
                              metadata=metadata, idempotency_key=idempotency_key)

    def resolve(self, key: str, *, value: str | None = None, version: int | str | None = None,
                reason: str, idempotency_key: str | None = None,
                namespace: str | None = None) -> OperationResult:
        """Settle a contested cell on ``value`` (or ``version``: its id, or the key's ordinal
        as ``"v3"``)."""
        return self._explicit("resolve", namespace, key=key, value=value, version=version,
                              reason=reason, idempotency_key=idempotency_key)

    def accept(self, key: str, value: str, *, reason: str | None = None,
               metadata: dict[str, Any] | None = None, idempotency_key: str | None = None,
               namespace: str | None = None) -> OperationResult:
        """Make ``value`` the key's current value, whatever trust or valid time would have
        decided (an explicit accept): the old one is superseded, and kept in the history."""
        return self._explicit("accept", namespace, key=key, value=value, reason=reason,
                              metadata=metadata, idempotency_key=idempotency_key)

    def reject(self, key: str, value: str | None = None, *, reason: str,
               metadata: dict[str, Any] | None = None, idempotency_key: str | None = None,
               namespace: str | None = None) -> OperationResult:
        """Say the current value contradicts the world: with ``value``, that one replaces it
        (the old one is kept as contradicted); without, the previous value is reinstated
        (NotFound, nothing written, when the key has no cell)."""
        return self._explicit("reject", namespace, key=key, value=value, reason=reason,
                              metadata=metadata, idempotency_key=idempotency_key)

    def restore(self, key: str, version: int | str, *, reason: str | None = None,
                metadata: dict[str, Any] | None = None,
                namespace: str | None = None) -> OperationResult:
        """Undo a retraction or rejection: the value of the revoked or contradicted
        ``version`` (its id, or the key's ordinal as ``"v3"``) becomes current again (scope
        ``review``; Conflict when ``version`` is neither). The new version starts from the
        restored one's metadata; ``metadata`` overlays it key by key."""
        return self._run(p.restore(self._ns(namespace), key, version=version, reason=reason,
                                   metadata=metadata))

    def _explicit(self, capability: str, namespace: str | None, *,
                  idempotency_key: str | None, **fact: Any) -> OperationResult:
        return self._run(p.explicit_op(
            self._ns(namespace), capability, idempotency_key=idempotency_key or
            p.new_idempotency_key(), wait_timeout=self.wait_timeout, **fact))

    def operations(self, *, key: str | None = None, key_contains: str | None = None,
                   op: str | None = None, actor: str | None = None, source: str | None = None,
                   page_size: int | None = None,
                   namespace: str | None = None) -> Iterator[Operation]:
        """The operation log, newest first, fetched page by page as you iterate."""
        return self._pages(p.operations_call(self._ns(namespace), key=key,
                                             key_contains=key_contains, op=op, actor=actor,
                                             source=source, limit=page_size),
                           Operation.from_json)

    def changes(self, *, after: int | None = None, wait: float | None = None,
                page_size: int | None = None,
                namespace: str | None = None) -> Iterator[ChangeEvent]:
        """The change feed (SPEC §12): every committed operation after the cursor ``after``
        (none: from the oldest kept), in commit order. Without ``wait`` it ends at the newest
        event; with ``wait`` (seconds) it never ends: each time it has caught up it long-polls
        for the next commit. Resume a broken iteration with ``after=<last event's cursor>``."""
        call = _changes.changes_call(self._ns(namespace), after=after, wait=wait, limit=page_size)
        while True:
            events, call = self._run(_changes.changes_page(call, self.base_url))
            yield from events
            if not events and wait is None:
                return

    def cells(self, *, status: str | None = None, search: str | None = None,
              as_of: str | datetime | None = None, filter: dict[str, Any] | None = None,
              page_size: int | None = None, namespace: str | None = None) -> Iterator[Cell]:
        """The frontier: every cell (or those with ``status``, or whose current version's
        metadata holds ``filter``), page by page, by key."""
        return self._pages(p.cells_call(self._ns(namespace), status=status, search=search,
                                        as_of=as_of, limit=page_size, filter=filter),
                           Cell.from_json)

    def _pages(self, call: p.Call | None, parse: Any) -> Iterator[Any]:
        while call is not None:
            page = self._run(p.page(call, parse, self.base_url))
            yield from page.items
            call = page.next

    def erase(self, key: str, *, report: bool = False,
              namespace: str | None = None) -> EraseReport | None:
        """Privacy erase (SPEC §6): the key and its values are gone for good."""
        return self._run(p.erase(self._ns(namespace), key, report=report))

    def namespaces(self, *, page_size: int | None = None) -> Iterator[NamespaceInfo]:
        """The namespaces this token reaches (an application token: those of its prefix),
        by name, page by page."""
        return self._pages(p.namespaces_call(limit=page_size), NamespaceInfo.from_json)

    def delete_namespace(self, namespace: str | None = None, *,
                         report: bool = False) -> NamespaceDeleted | None:
        """Delete the namespace and everything in it (SPEC §13; scope ``review``): it answers
        404 afterwards and its name starts empty."""
        return self._run(p.delete_namespace(self._ns(namespace), report=report))

    def export(self, *, namespace: str | None = None) -> str:
        """The namespace as NDJSON (``pmem_import`` reads it back; scope ``review``)."""
        return self._run(p.export(self._ns(namespace)))


class AsyncClient(_Base):
    """:class:`Client` for asyncio: the same methods, awaited (iterators are async)."""

    def __init__(self, base_url: str, token: str, *, namespace: str | None = None,
                 timeout: float = DEFAULT_TIMEOUT, retry: p.Retry | None = None,
                 channel: str = "api", wait_timeout: float = WAIT_TIMEOUT,
                 transport: httpx2.AsyncBaseTransport | None = None) -> None:
        super().__init__(base_url, token, namespace=namespace, retry=retry, channel=channel,
                         wait_timeout=wait_timeout)
        self._http = httpx2.AsyncClient(base_url=self.base_url, headers=self._headers,
                                        timeout=timeout, transport=transport)

    async def __aenter__(self) -> AsyncClient:
        if self._namespace is None:
            try:
                await self.whoami()  # so that .namespace is known, as Client's is
            except BaseException:
                await self.aclose()
                raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, call: p.Call) -> p.Reply:
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self._http.request(call.method, call.url, **self._request(call))
            except RETRIED_TRANSPORT as exc:
                await asyncio.sleep(self._transport_failed(exc, call, attempt))
                continue
            outcome = self._outcome(response, attempt)
            if isinstance(outcome, p.Reply):
                return outcome
            await asyncio.sleep(outcome)

    async def _run(self, steps: p.Steps[T]) -> T:
        try:
            step = next(steps)
            while True:
                if isinstance(step, p.Pause):
                    await asyncio.sleep(step.seconds)
                    step = steps.send(p.Reply(200, None))
                    continue
                try:
                    reply = await self._send(step)
                except errors.PmemError as exc:
                    step = steps.throw(exc)
                else:
                    step = steps.send(reply)
        except StopIteration as done:
            return done.value

    @property
    def namespace(self) -> str:
        """As :attr:`Client.namespace`; known once ``whoami`` was asked (``async with`` asks
        it on entry) or when it was given."""
        return self._require_namespace()

    async def _ns(self, namespace: str | None) -> str:
        if namespace is not None:
            return namespace
        if self._namespace is None:
            await self.whoami()
        return self._require_namespace()

    async def whoami(self) -> Whoami:
        return self._learn(await self._run(p.whoami()))

    async def remember(self, text: str | None = None, *,
                       facts: list[dict[str, Any]] | None = None, source: str | None = None,
                       observed_at: str | datetime | None = None, wait: bool = True,
                       idempotency_key: str | None = None,
                       namespace: str | None = None,
                       messages: list[dict[str, Any]] | None = None, ttl: int | None = None,
                       expires_at: str | datetime | None = None) -> Observation:
        facts = p.with_expiry(facts, ttl, expires_at)
        return await self._run(p.remember(
            await self._ns(namespace), text=text, facts=facts, source=source,
            observed_at=observed_at, wait=wait,
            idempotency_key=idempotency_key or p.new_idempotency_key(),
            wait_timeout=self.wait_timeout, messages=messages))

    async def remember_many(self, observations: list[dict[str, Any]], *, wait: bool = True,
                            namespace: str | None = None) -> list[Observation]:
        return await self._run(p.remember_many(await self._ns(namespace), observations,
                                               wait=wait, wait_timeout=self.wait_timeout))

    async def observation(self, observation_id: int, *,
                          namespace: str | None = None) -> Observation:
        return await self._run(p.observation(await self._ns(namespace), observation_id))

    async def recall(self, query: str, *, mode: str = "frontier", k: int | None = None,
                     as_of: str | datetime | None = None, disclose: list[str] | None = None,
                     filter: dict[str, Any] | None = None, min_score: float | None = None,
                     namespace: str | None = None) -> ReadResult:
        return await self._run(p.recall(await self._ns(namespace), query=query, mode=mode, k=k,
                                        as_of=as_of, disclose=disclose, filter=filter,
                                        min_score=min_score))

    async def answer(self, query: str, *, mode: str = "frontier", k: int | None = None,
                     disclose: list[str] | None = None,
                     namespace: str | None = None) -> AnswerResult:
        return await self._run(p.answer(await self._ns(namespace), query=query, mode=mode,
                                        k=k, disclose=disclose))

    async def get_fact(self, key: str, *, as_of: str | datetime | None = None,
                       history: int | None = None, namespace: str | None = None) -> Cell:
        return await self._run(p.get_fact(await self._ns(namespace), key, as_of=as_of,
                                          history=history))

    async def fact_history(self, key: str, *, limit: int = 50, before: str | None = None,
                           as_of: str | datetime | None = None, search: str | None = None,
                           namespace: str | None = None) -> HistoryPage:
        return await self._run(p.fact_history(await self._ns(namespace), key, limit=limit,
                                              before=before, as_of=as_of, search=search))

    async def iter_history(self, key: str, *, as_of: str | datetime | None = None,
                           page_size: int = 200, namespace: str | None = None
                           ) -> AsyncIterator[HistoryEntry]:
        before: str | None = None
        while True:
            page = await self.fact_history(key, limit=page_size, before=before, as_of=as_of,
                                           namespace=namespace)
            for entry in page.results:
                yield entry
            if not page.next:
                return
            before = page.next

    async def retract(self, key: str, reason: str, *, version: int | str | None = None,
                      idempotency_key: str | None = None,
                      namespace: str | None = None) -> OperationResult:
        return await self._explicit("retract", namespace, key=key, reason=reason,
                                    version=version, idempotency_key=idempotency_key)

    async def contest(self, key: str, value: str, *, reason: str | None = None,
                      idempotency_key: str | None = None,
                      metadata: dict[str, Any] | None = None,
                      namespace: str | None = None) -> OperationResult:
        return await self._explicit("contest", namespace, key=key, value=value, reason=reason,
                                    metadata=metadata, idempotency_key=idempotency_key)

    async def resolve(self, key: str, *, value: str | None = None,
                      version: int | str | None = None,
                      reason: str, idempotency_key: str | None = None,
                      namespace: str | None = None) -> OperationResult:
        return await self._explicit("resolve", namespace, key=key, value=value,
                                    version=version, reason=reason,
                                    idempotency_key=idempotency_key)

    async def accept(self, key: str, value: str, *, reason: str | None = None,
                     metadata: dict[str, Any] | None = None,
                     idempotency_key: str | None = None,
                     namespace: str | None = None) -> OperationResult:
        return await self._explicit("accept", namespace, key=key, value=value, reason=reason,
                                    metadata=metadata, idempotency_key=idempotency_key)

    async def reject(self, key: str, value: str | None = None, *, reason: str,
                     metadata: dict[str, Any] | None = None,
                     idempotency_key: str | None = None,
                     namespace: str | None = None) -> OperationResult:
        return await self._explicit("reject", namespace, key=key, value=value, reason=reason,
                                    metadata=metadata, idempotency_key=idempotency_key)

    async def restore(self, key: str, version: int | str, *, reason: str | None = None,
                      metadata: dict[str, Any] | None = None,
                      namespace: str | None = None) -> OperationResult:
        return await self._run(p.restore(await self._ns(namespace), key, version=version,
                                         reason=reason, metadata=metadata))

    async def _explicit(self, capability: str, namespace: str | None, *,
                        idempotency_key: str | None, **fact: Any) -> OperationResult:
        return await self._run(p.explicit_op(
            await self._ns(namespace), capability, idempotency_key=idempotency_key or
            p.new_idempotency_key(), wait_timeout=self.wait_timeout, **fact))

    async def operations(self, *, key: str | None = None, key_contains: str | None = None,
                         op: str | None = None, actor: str | None = None,
                         source: str | None = None, page_size: int | None = None,
                         namespace: str | None = None) -> AsyncIterator[Operation]:
        call: p.Call | None = p.operations_call(
            await self._ns(namespace), key=key, key_contains=key_contains, op=op, actor=actor,
            source=source, limit=page_size)
        async for item in self._pages(call, Operation.from_json):
            yield item

    async def changes(self, *, after: int | None = None, wait: float | None = None,
                      page_size: int | None = None,
                      namespace: str | None = None) -> AsyncIterator[ChangeEvent]:
        """As :meth:`Client.changes`."""
        call = _changes.changes_call(await self._ns(namespace), after=after, wait=wait,
                              limit=page_size)
        while True:
            events, call = await self._run(_changes.changes_page(call, self.base_url))
            for event in events:
                yield event
            if not events and wait is None:
                return

    async def cells(self, *, status: str | None = None, search: str | None = None,
                    as_of: str | datetime | None = None, filter: dict[str, Any] | None = None,
                    page_size: int | None = None,
                    namespace: str | None = None) -> AsyncIterator[Cell]:
        call = p.cells_call(await self._ns(namespace), status=status, search=search,
                            as_of=as_of, limit=page_size, filter=filter)
        async for item in self._pages(call, Cell.from_json):
            yield item

    async def _pages(self, call: p.Call | None, parse: Any) -> AsyncIterator[Any]:
        while call is not None:
            page = await self._run(p.page(call, parse, self.base_url))
            for item in page.items:
                yield item
            call = page.next

    async def erase(self, key: str, *, report: bool = False,
                    namespace: str | None = None) -> EraseReport | None:
        return await self._run(p.erase(await self._ns(namespace), key, report=report))

    async def namespaces(self, *, page_size: int | None = None) -> AsyncIterator[NamespaceInfo]:
        async for item in self._pages(p.namespaces_call(limit=page_size),
                                      NamespaceInfo.from_json):
            yield item

    async def delete_namespace(self, namespace: str | None = None, *,
                               report: bool = False) -> NamespaceDeleted | None:
        return await self._run(p.delete_namespace(await self._ns(namespace), report=report))

    async def export(self, *, namespace: str | None = None) -> str:
        return await self._run(p.export(await self._ns(namespace)))
