"""``Client`` and ``AsyncClient``: the P-Mem API for agents and scripts, one method per
capability (CONTRACT "Agents: MCP server and Python client").

Both drive the capabilities of :mod:`pmem_client._protocol` over ``httpx2``; they differ
only in how a request is sent and how a retry waits. Their capabilities are written once, in
:mod:`pmem_client._async_core` (``_sync_core`` is generated from it by
``tools/unasync_client.py``); here is what the twins do differently: how each is made and
closed, whether the namespace is asked on entry, and the pages an iteration fetches (the
blocking client names the namespace when called, the async one when first iterated).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from typing import Any

import httpx2

from . import _changes
from . import _protocol as p
from ._async_core import AsyncCore
from ._base import DEFAULT_TIMEOUT, WAIT_TIMEOUT
from ._sync_core import SyncCore
from .types import Cell, ChangeEvent, NamespaceInfo, Operation


class Client(SyncCore):
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


    @property
    def namespace(self) -> str:
        """The namespace calls act on unless they name one: the one given, else the token's
        (asked once, from ``whoami``). An application token has none: name it."""
        if self._namespace is None:
            self.whoami()
        return self._require_namespace()

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

    def namespaces(self, *, page_size: int | None = None) -> Iterator[NamespaceInfo]:
        """The namespaces this token reaches (an application token: those of its prefix),
        by name, page by page."""
        return self._pages(p.namespaces_call(limit=page_size), NamespaceInfo.from_json)


class AsyncClient(AsyncCore):
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

    @property
    def namespace(self) -> str:
        """As :attr:`Client.namespace`; known once ``whoami`` was asked (``async with`` asks
        it on entry) or when it was given."""
        return self._require_namespace()

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

    async def namespaces(self, *, page_size: int | None = None) -> AsyncIterator[NamespaceInfo]:
        async for item in self._pages(p.namespaces_call(limit=page_size),
                                      NamespaceInfo.from_json):
            yield item
