"""Waiting for an observation to settle (committed or failed) without polling the database.

A commit announces the observations it settled on the PostgreSQL channel
:data:`~memory.domain.SETTLED_CHANNEL` inside its own transaction, so the notice is delivered
only if it commits (``memory.services.settle.notify_settled``). Each process that waits keeps
ONE listening connection, on a thread of the process's background runner
(:class:`memory.background.ProcessThread`) started at its first wait, and wakes the waiters
of the ids a notice names; a waiting request holds no connection of its own beyond Django's.
A notice can still be missed (the listener reconnecting after the database went away): every
waiter also looks at the row every :data:`SAFETY_POLL_SECONDS`, so a wait never outlasts a
missed notice by more than that.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import psycopg
from django.db import connection

from memory.background import ProcessThread
from memory.domain import SETTLED_CHANNEL, SETTLED_STATES
from memory.models import Evidence

log = logging.getLogger("pmem.settled")

#: How long a waiter sleeps at most between two looks at its row: the net under a missed notice.
SAFETY_POLL_SECONDS = 1.0
#: How long a wait lets the listener connect before it looks at the row the first time.
_READY_SECONDS = 2.0
#: How often the listening thread looks up from the connection (to notice a stop).
_TICK_SECONDS = 0.25


class SettledListener:
    """One process's listening connection, fanning each notice out to its waiters (those of
    the ids its payload names)."""

    channel = SETTLED_CHANNEL

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[int, set[threading.Event]] = {}
        self._thread = ProcessThread(f"{self.channel}-listener", self._run)
        self.ready = threading.Event()
        self.delivered = 0  # notices received (the tests read it)

    def watch(self, evidence_id: int) -> threading.Event:
        """An event set when a notice names ``evidence_id``; :meth:`forget` it after."""
        self._start()
        event = threading.Event()
        with self._lock:
            self._waiters.setdefault(evidence_id, set()).add(event)
        return event

    def forget(self, evidence_id: int, event: threading.Event) -> None:
        with self._lock:
            waiting = self._waiters.get(evidence_id)
            if waiting is not None:
                waiting.discard(event)
                if not waiting:
                    del self._waiters[evidence_id]

    def waiting(self, evidence_id: int) -> bool:
        with self._lock:
            return bool(self._waiters.get(evidence_id))

    def stop(self) -> None:
        """Close the listening connection (a test database must be dropped after)."""
        self._thread.stop(timeout=5 * _TICK_SECONDS)
        self.ready.clear()

    def _start(self) -> None:
        # First wait in this process (or in a child forked after one): a thread of its own,
        # listening before the caller first looks at its row.
        if self._thread.ensure(_params(), on_start=self.ready.clear):
            self.ready.wait(_READY_SECONDS)

    def _run(self, stop: threading.Event, params: dict[str, Any]) -> None:
        while not stop.is_set():
            try:
                with psycopg.connect(**params, autocommit=True) as conn:
                    conn.execute(f"LISTEN {self.channel}")
                    self.ready.set()
                    while not stop.is_set():
                        for notice in conn.notifies(timeout=_TICK_SECONDS):
                            self._deliver(notice.payload)
            except Exception:
                self.ready.clear()
                if stop.is_set():
                    return
                log.warning("listening on %s failed; reconnecting", self.channel,
                            exc_info=True)
                self._wake_all()  # their rows may have settled meanwhile: each looks again
                stop.wait(SAFETY_POLL_SECONDS)

    def ids(self, payload: str) -> list[int]:
        """The ids a notice names: the settled observations, comma-separated."""
        return [int(part) for part in payload.split(",") if part.strip().isdigit()]

    def _deliver(self, payload: str) -> None:
        ids = self.ids(payload)
        with self._lock:
            self.delivered += 1
            events = [e for i in ids for e in self._waiters.get(i, ())]
        for event in events:
            event.set()

    def _wake_all(self) -> None:
        with self._lock:
            events = [e for waiting in self._waiters.values() for e in waiting]
        for event in events:
            event.set()


def _params() -> dict[str, Any]:
    """The connection parameters of Django's database, for psycopg itself."""
    params = dict(connection.get_connection_params())
    for django_only in ("cursor_factory", "context", "prepare_threshold"):
        params.pop(django_only, None)
    return params


LISTENER = SettledListener()


def observation_when_settled(evidence_id: int, timeout: float) -> Evidence:
    """The observation once it is committed or failed, or as it is after ``timeout`` seconds
    (text and facts; never the extraction or the embedding). Woken by the commit's notice:
    one look at the row before sleeping and one per wake-up, each the answer when it finds
    the row settled (the wake-up is what a waiting request pays after the commit)."""
    deadline = time.monotonic() + timeout
    row = Evidence.objects.defer("extracted", "embedding").filter(pk=evidence_id)
    event = LISTENER.watch(evidence_id)
    try:
        while True:
            evidence = row.get()
            left = deadline - time.monotonic()
            if evidence.state in SETTLED_STATES or left <= 0:
                return evidence
            event.wait(min(left, SAFETY_POLL_SECONDS))
            event.clear()
    finally:
        LISTENER.forget(evidence_id, event)
