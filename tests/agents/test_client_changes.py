"""``changes()`` of the Python clients against the live API: the feed in commit order, ending
at the newest event without ``wait``, following new commits with it, resuming after a cursor;
sync and async alike."""

from __future__ import annotations

import threading

import anyio
import pytest
from django.db import connection

from memory.services import operation_apply
from pmem_client import AsyncClient, ChangeEvent, Client

pytestmark = pytest.mark.django_db(transaction=True)


def accept(ns, key: str, value: str) -> None:
    operation_apply(namespace=ns, key=key, op="accept", value=value, actor="user:t")


def accept_later(seconds: float, ns, key: str, value: str) -> None:
    """Commit from another thread after ``seconds`` (closing that thread's connection)."""

    def run() -> None:
        try:
            accept(ns, key, value)
        finally:
            connection.close()

    threading.Timer(seconds, run).start()


def test_changes_iterates_the_feed_in_commit_order_and_ends_at_the_newest(live_server, agent):
    ns, token = agent("changes")
    for value in ("a", "b", "c"):
        accept(ns, "k", value)
    operation_apply(namespace=ns, key="k", op="revoke", actor="user:t")
    with Client(live_server.url, token) as memory:
        events = list(memory.changes(page_size=2))
        assert all(isinstance(e, ChangeEvent) for e in events)
        assert [(e.cursor, e.op, e.value) for e in events] == [
            (1, "accept", "a"), (2, "accept", "b"), (3, "accept", "c"), (4, "revoke", "c"),
            (5, "reinstate", "b")]
        assert events[1].previous is not None and events[1].previous.value == "a"
        assert events[-1].head is not None and events[-1].head.value == "b"
        assert [e.cursor for e in memory.changes(after=3)] == [4, 5]


def test_changes_with_wait_follows_new_commits(live_server, agent):
    ns, token = agent("follow")
    accept(ns, "k", "first")
    with Client(live_server.url, token) as memory:
        feed = memory.changes(wait=30)
        assert next(feed).value == "first"
        accept_later(0.3, ns, "k", "second")
        assert next(feed).value == "second"  # the long poll woken by the commit


def test_the_async_client_iterates_the_same_feed(live_server, agent):
    ns, token = agent("async-changes")
    for value in ("a", "b"):
        accept(ns, "k", value)

    async def main() -> list[int]:
        async with AsyncClient(live_server.url, token) as memory:
            return [e.cursor async for e in memory.changes()]

    assert anyio.run(main) == [1, 2]
