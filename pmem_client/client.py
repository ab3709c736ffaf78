"""``Client`` and ``AsyncClient``: the P-Mem API for agents and scripts, one method per
capability (CONTRACT "Agents: MCP server and Python client").

Both drive the capabilities of :mod:`pmem_client._protocol` over ``httpx2``; they differ
only in how a request is sent and how a retry waits.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from typing import Any, TypeVar

import httpx2

from . import _protocol as p
from . import errors
from .types import (
    Cell,
    EraseReport,
    HistoryEntry,
    HistoryPage,
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

    @staticmethod
    def _request(call: p.Call) -> dict[str, Any]:
        out: dict[str, Any] = {"params": call.params}
        if call.json is not None:
            out["json"] = call.json
        return out


class Client(_Base):
    """The P-Mem API, synchronously. ``base_url`` is the server's root
    (``http://127.0.0.1:8000``); the namespace is the token's (asked once, from ``whoami``).

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
        if self._namespace is None:
            self._namespace = self.whoami().namespace
        return self._namespace

    # --- capabilities ------------------------------------------------------------------------

    def whoami(self) -> Whoami:
        """The token's namespace, scope and client name."""
        who = self._run(p.whoami())
        self._namespace = self._namespace or who.namespace
        return who

    def remember(self, text: str | None = None, *, facts: list[dict[str, Any]] | None = None,
                 source: str | None = None, observed_at: str | datetime | None = None,
                 wait: bool = True, idempotency_key: str | None = None) -> Observation:
        """Record an observation: ``text`` and/or ``facts`` (``[{"key", "value", "op"?}]``).
        Waits until it is committed (its operations then say what changed) unless
        ``wait=False``. One idempotency key is made per call (or pass your own), so the
        client's retries never store it twice: a key sent again with the same request answers
        the first observation (``replayed`` True), with another request raises
        :class:`~pmem_client.IdempotencyConflict`. A ``source`` with a trust level must be
        one the token is bound to (:class:`~pmem_client.Forbidden` otherwise); left out, the
        token's own source when it is bound to one."""
        return self._run(p.remember(self.namespace, text=text, facts=facts, source=source,
                                    observed_at=observed_at, wait=wait,
                                    idempotency_key=idempotency_key or p.new_idempotency_key(),
                                    wait_timeout=self.wait_timeout))

    def observation(self, observation_id: int) -> Observation:
        """An observation's status and, once committed, its operations."""
        return self._run(p.observation(self.namespace, observation_id))

    def recall(self, query: str, *, mode: str = "frontier", k: int | None = None,
               as_of: str | datetime | None = None,
               disclose: list[str] | None = None) -> ReadResult:
        """Read memory for a query (``frontier``: current values; ``raw``, ``raw_ordered``,
        ``pruned``: the evidence). ``as_of`` reads the memory as it was then."""
        return self._run(p.recall(self.namespace, query=query, mode=mode, k=k, as_of=as_of,
                                  disclose=disclose))

    def get_fact(self, key: str, *, as_of: str | datetime | None = None,
                 history: int | None = None) -> Cell:
        """A cell: value, status, alternatives and newest history. Raises NotFound."""
        return self._run(p.get_fact(self.namespace, key, as_of=as_of, history=history))

    def fact_history(self, key: str, *, limit: int = 50, before: str | None = None,
                     as_of: str | datetime | None = None,
                     search: str | None = None) -> HistoryPage:
        """One page of a key's history, newest first; pass ``page.next`` as ``before``."""
        return self._run(p.fact_history(self.namespace, key, limit=limit, before=before,
                                        as_of=as_of, search=search))

    def iter_history(self, key: str, *, as_of: str | datetime | None = None,
                     page_size: int = 200) -> Iterator[HistoryEntry]:
        """Every version of a key, newest first, page by page."""
        before: str | None = None
        while True:
            page = self.fact_history(key, limit=page_size, before=before, as_of=as_of)
            yield from page.results
            if not page.next:
                return
            before = page.next

    def retract(self, key: str, reason: str, *, version: int | None = None,
                idempotency_key: str | None = None) -> OperationResult:
        """Retract the key's current value (or the non-head ``version``): the previous value
        is reinstated. Raises Conflict with the reason when it is invalid in the cell's state."""
        return self._explicit("retract", key=key, reason=reason, version=version,
                              idempotency_key=idempotency_key)

    def contest(self, key: str, value: str, *, reason: str | None = None,
                idempotency_key: str | None = None) -> OperationResult:
        """Hold ``value`` open beside the current one: the cell becomes contested."""
        return self._explicit("contest", key=key, value=value, reason=reason,
                              idempotency_key=idempotency_key)

    def resolve(self, key: str, *, value: str | None = None, version: int | None = None,
                reason: str, idempotency_key: str | None = None) -> OperationResult:
        """Settle a contested cell on ``value`` (or ``version``)."""
        return self._explicit("resolve", key=key, value=value, version=version, reason=reason,
                              idempotency_key=idempotency_key)

    def _explicit(self, capability: str, *, idempotency_key: str | None,
                  **fact: Any) -> OperationResult:
        return self._run(p.explicit_op(
            self.namespace, capability, idempotency_key=idempotency_key or
            p.new_idempotency_key(), wait_timeout=self.wait_timeout, **fact))

    def operations(self, *, key: str | None = None, key_contains: str | None = None,
                   op: str | None = None, actor: str | None = None, source: str | None = None,
                   page_size: int | None = None) -> Iterator[Operation]:
        """The operation log, newest first, fetched page by page as you iterate."""
        return self._pages(p.operations_call(self.namespace, key=key, key_contains=key_contains,
                                             op=op, actor=actor, source=source,
                                             limit=page_size), Operation.from_json)

    def cells(self, *, status: str | None = None, search: str | None = None,
              as_of: str | datetime | None = None,
              page_size: int | None = None) -> Iterator[Cell]:
        """The frontier: every cell (or those with ``status``), page by page, by key."""
        return self._pages(p.cells_call(self.namespace, status=status, search=search,
                                        as_of=as_of, limit=page_size), Cell.from_json)

    def _pages(self, call: p.Call | None, parse: Any) -> Iterator[Any]:
        while call is not None:
            page = self._run(p.page(call, parse, self.base_url))
            yield from page.items
            call = page.next

    def erase(self, key: str, *, report: bool = False) -> EraseReport | None:
        """Privacy erase (SPEC §6): the key and its values are gone for good."""
        return self._run(p.erase(self.namespace, key, report=report))


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

    async def namespace(self) -> str:
        if self._namespace is None:
            self._namespace = (await self.whoami()).namespace
        return self._namespace

    async def whoami(self) -> Whoami:
        who = await self._run(p.whoami())
        self._namespace = self._namespace or who.namespace
        return who

    async def remember(self, text: str | None = None, *,
                       facts: list[dict[str, Any]] | None = None, source: str | None = None,
                       observed_at: str | datetime | None = None, wait: bool = True,
                       idempotency_key: str | None = None) -> Observation:
        return await self._run(p.remember(
            await self.namespace(), text=text, facts=facts, source=source,
            observed_at=observed_at, wait=wait,
            idempotency_key=idempotency_key or p.new_idempotency_key(),
            wait_timeout=self.wait_timeout))

    async def observation(self, observation_id: int) -> Observation:
        return await self._run(p.observation(await self.namespace(), observation_id))

    async def recall(self, query: str, *, mode: str = "frontier", k: int | None = None,
                     as_of: str | datetime | None = None,
                     disclose: list[str] | None = None) -> ReadResult:
        return await self._run(p.recall(await self.namespace(), query=query, mode=mode, k=k,
                                        as_of=as_of, disclose=disclose))

    async def get_fact(self, key: str, *, as_of: str | datetime | None = None,
                       history: int | None = None) -> Cell:
        return await self._run(p.get_fact(await self.namespace(), key, as_of=as_of,
                                          history=history))

    async def fact_history(self, key: str, *, limit: int = 50, before: str | None = None,
                           as_of: str | datetime | None = None,
                           search: str | None = None) -> HistoryPage:
        return await self._run(p.fact_history(await self.namespace(), key, limit=limit,
                                              before=before, as_of=as_of, search=search))

    async def iter_history(self, key: str, *, as_of: str | datetime | None = None,
                           page_size: int = 200) -> AsyncIterator[HistoryEntry]:
        before: str | None = None
        while True:
            page = await self.fact_history(key, limit=page_size, before=before, as_of=as_of)
            for entry in page.results:
                yield entry
            if not page.next:
                return
            before = page.next

    async def retract(self, key: str, reason: str, *, version: int | None = None,
                      idempotency_key: str | None = None) -> OperationResult:
        return await self._explicit("retract", key=key, reason=reason, version=version,
                                    idempotency_key=idempotency_key)

    async def contest(self, key: str, value: str, *, reason: str | None = None,
                      idempotency_key: str | None = None) -> OperationResult:
        return await self._explicit("contest", key=key, value=value, reason=reason,
                                    idempotency_key=idempotency_key)

    async def resolve(self, key: str, *, value: str | None = None, version: int | None = None,
                      reason: str, idempotency_key: str | None = None) -> OperationResult:
        return await self._explicit("resolve", key=key, value=value, version=version,
                                    reason=reason, idempotency_key=idempotency_key)

    async def _explicit(self, capability: str, *, idempotency_key: str | None,
                        **fact: Any) -> OperationResult:
        return await self._run(p.explicit_op(
            await self.namespace(), capability, idempotency_key=idempotency_key or
            p.new_idempotency_key(), wait_timeout=self.wait_timeout, **fact))

    async def operations(self, *, key: str | None = None, key_contains: str | None = None,
                         op: str | None = None, actor: str | None = None,
                         source: str | None = None,
                         page_size: int | None = None) -> AsyncIterator[Operation]:
        call: p.Call | None = p.operations_call(
            await self.namespace(), key=key, key_contains=key_contains, op=op, actor=actor,
            source=source, limit=page_size)
        async for item in self._pages(call, Operation.from_json):
            yield item

    async def cells(self, *, status: str | None = None, search: str | None = None,
                    as_of: str | datetime | None = None,
                    page_size: int | None = None) -> AsyncIterator[Cell]:
        call = p.cells_call(await self.namespace(), status=status, search=search, as_of=as_of,
                            limit=page_size)
        async for item in self._pages(call, Cell.from_json):
            yield item

    async def _pages(self, call: p.Call | None, parse: Any) -> AsyncIterator[Any]:
        while call is not None:
            page = await self._run(p.page(call, parse, self.base_url))
            for item in page.items:
                yield item
            call = page.next

    async def erase(self, key: str, *, report: bool = False) -> EraseReport | None:
        return await self._run(p.erase(await self.namespace(), key, report=report))
