"""Reading the change feed (SPEC §12): a namespace's events after a cursor, in commit order,
in the CONTRACT's JSON shape, and waiting for the next one (LISTEN on the channel the
commits NOTIFY, never a poll loop)."""

from __future__ import annotations

import json
import time
from typing import Any

from django.db import connection

from memory.domain.changes import CHANGES_CHANNEL

from .settled import SettledListener

#: The fields of an event, in the order the CONTRACT lists them (``head``, the cell's head
#: after the event, is one more: replaying the feed needs nothing else).
FIELDS = ("cursor", "op", "key", "version", "ordinal", "value", "previous", "status",
          "cell_status", "actor", "method", "source", "reason", "observation", "committed_at",
          "head")

_SELECT = """
SELECT c.cursor, c.op, c.key, c.version_id, c.ordinal, c.value, c.previous, c.status,
       c.cell_status, c.actor, c.method, COALESCE(e.source, ''), c.reason, c.observation_id,
       c.committed_at, c.head
  FROM memory_changeevent c LEFT JOIN memory_evidence e ON e.id = c.observation_id
 WHERE c.namespace_id = %s AND c.cursor > %s {ops}
 ORDER BY c.cursor
 LIMIT %s
"""


def events_after(namespace_id: int, after: int | None, limit: int,
                 ops: frozenset[str] | None = None) -> list[dict[str, Any]]:
    """Up to ``limit`` events of the namespace after cursor ``after`` (None: from the oldest
    kept), ascending; only those whose op is in ``ops`` when given. One index range scan
    (the unique (namespace, cursor) index)."""
    params: list[Any] = [namespace_id, after if after is not None else 0]
    where = ""
    if ops is not None:
        where = "AND c.op = ANY(%s)"
        params.append(sorted(ops))
    params.append(limit)
    with connection.cursor() as cur:
        cur.execute(_SELECT.format(ops=where), params)
        rows = cur.fetchall()
    return [_event(row) for row in rows]


def _event(row: tuple[Any, ...]) -> dict[str, Any]:
    event = dict(zip(FIELDS, row, strict=True))
    for name in ("previous", "head"):  # Django's cursor leaves jsonb as its text
        if isinstance(event[name], str):
            event[name] = json.loads(event[name])
    event["committed_at"] = event["committed_at"].isoformat().replace("+00:00", "Z")
    return event


def last_cursor(namespace_id: int) -> int:
    """The namespace's newest event's cursor (0 before any)."""
    with connection.cursor() as cur:
        cur.execute("SELECT last FROM memory_changecounter WHERE namespace_id = %s",
                    [namespace_id])
        row = cur.fetchone()
    return int(row[0]) if row else 0


#: The id a namespace reads as before its first write made it (an application token's; no
#: row has it). Its waiters cannot know the id that write will give it, so every notice
#: wakes them, and they look the name up again (:class:`NamespaceWatch`).
UNWRITTEN = 0


class ChangesListener(SettledListener):
    """The process's one LISTEN on the change channel: a waiter watches its namespace and is
    woken by the notice of a commit there (payload ``"<namespace>:<last cursor>"``), and the
    waiters of namespaces not written yet by every notice. However many requests wait or
    stream, the process holds ONE listening connection."""

    channel = CHANGES_CHANNEL

    def ids(self, payload: str) -> list[int]:
        namespace, _, _ = payload.partition(":")
        return [int(namespace), UNWRITTEN] if namespace.isdigit() else []


LISTENER = ChangesListener()


class NamespaceWatch:
    """A waiter's watch on its namespace's notices, watching before its first read so that a
    commit between the read and the sleep still wakes it. A namespace not written yet is
    looked up by ``name`` each time :meth:`current` is asked, until its first write made it;
    from then on only its own notices wake the waiter."""

    def __init__(self, namespace_id: int, name: str) -> None:
        self.id, self.name = namespace_id, name
        self._event = LISTENER.watch(namespace_id)

    def current(self) -> int:
        """The namespace's id now (``UNWRITTEN`` while it is not written yet)."""
        if self.id == UNWRITTEN:
            with connection.cursor() as cur:
                cur.execute("SELECT id FROM memory_namespace WHERE name = %s", [self.name])
                row = cur.fetchone()
            if row is not None:
                event = LISTENER.watch(int(row[0]))  # before the read that follows
                LISTENER.forget(UNWRITTEN, self._event)
                self.id, self._event = int(row[0]), event
        return self.id

    def wait(self, seconds: float) -> bool:
        """Sleep until a notice or ``seconds``; whether a notice came. The caller reads the
        feed again either way."""
        woken = self._event.wait(seconds)
        self._event.clear()
        return woken

    def close(self) -> None:
        LISTENER.forget(self.id, self._event)

#: How long a waiter sleeps at most between two looks at the feed: the net under a notice
#: missed while the listener reconnected (it wakes every waiter when its connection fails).
SAFETY_SECONDS = 5.0


def events_waiting(namespace_id: int, after: int | None, limit: int, wait: float,
                   ops: frozenset[str] | None = None, name: str = "") -> list[dict[str, Any]]:
    """:func:`events_after`, waiting up to ``wait`` seconds for the first event when there
    is none yet (``name``: the namespace's, for one not written yet)."""
    if wait <= 0:
        return events_after(namespace_id, after, limit, ops)
    deadline = time.monotonic() + wait
    watch = NamespaceWatch(namespace_id, name)
    try:
        while True:
            found = events_after(watch.current(), after, limit, ops)
            left = deadline - time.monotonic()
            if found or left <= 0:
                return found
            watch.wait(min(left, SAFETY_SECONDS))
    finally:
        watch.close()
