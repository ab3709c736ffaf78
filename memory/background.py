"""The one in-process runner of background work: threads a process keeps beside its requests
or tasks, each a daemon with its own database connection.

Work that must survive the process, be retried, or run once for the whole installation is a
Celery task (``memory.tasks``: drains, extraction, the erase follow-up, the sweeps). What runs
here is work whose loss costs nothing but time, because a sweep or the next request redoes it,
and which is worth doing in the process that caused it, at once, without a broker round trip:

- :class:`KeyedQueue` — "do this for namespace N soon": requests for the same key coalesce,
  one thread works them off one at a time. The frontier indexer
  (``memory.services.frontier``) and the deferred embedder (``memory.services.embeddings``).
- :class:`ProcessThread` — one long-lived thread per process: the listener of settled
  observations (``memory.selectors.settled``) holds one ``LISTEN`` connection.

Every thread here is started lazily, at its first use, and again in a child forked after that
(Celery's prefork pool forks after the parent may have started one: a thread is never
inherited across a fork). A process that exits loses nothing but the work in flight.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from django.db import connection

log = logging.getLogger("pmem.background")

K = TypeVar("K", bound=Hashable)


class ProcessThread:
    """One daemon thread per process running ``target(stop, *args)``, started by
    :meth:`ensure` (again after a fork), stopped by :meth:`stop`. ``target`` returns once
    ``stop`` is set."""

    def __init__(self, name: str, target: Callable[..., None]) -> None:
        self.name = name
        self._target = target
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._stop = threading.Event()

    def ensure(self, *args: Any, on_start: Callable[[], None] | None = None) -> bool:
        """Start the thread unless this process runs it already; True when it started now.
        ``on_start`` runs first, under the same lock (a caller resets what the thread will
        report, before the thread can report it)."""
        with self._lock:
            if self.alive():
                return False
            if on_start is not None:
                on_start()
            self._pid, self._stop = os.getpid(), threading.Event()
            self._thread = threading.Thread(target=self._run, args=(self._stop, *args),
                                            name=self.name, daemon=True)
            self._thread.start()
            return True

    def alive(self) -> bool:
        return (self._thread is not None and self._thread.is_alive()
                and self._pid == os.getpid())

    def stop(self, timeout: float | None = None) -> None:
        """Ask the thread to return, and wait for it up to ``timeout`` seconds."""
        with self._lock:
            thread, self._thread = self._thread, None
            self._stop.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _run(self, stop: threading.Event, *args: Any) -> None:
        try:
            self._target(stop, *args)
        finally:
            connection.close()  # this thread's own connection, if it opened one


class KeyedQueue(Generic[K]):
    """Requests by key, worked off by ``work(key)`` on one thread of this process.

    A key requested again before its turn is done once. With ``quiet``, the thread waits
    until requests have paused that long (at most ``max_delay`` after the first), so a burst
    of commits is one batch of work. ``nice``: the thread's scheduling priority (Linux),
    below the requests it serves. A failure is logged; the key is left for the next request
    or the sweep."""

    def __init__(self, name: str, work: Callable[[K], object], *, quiet: float = 0.0,
                 max_delay: float = 0.0, nice: int | None = None) -> None:
        self._work = work
        self._quiet, self._max_delay, self._nice = quiet, max_delay, nice
        self._cond = threading.Condition()
        self._pending: set[K] = set()
        self._busy = False
        self._last = 0.0  # monotonic: when the latest request came
        self._thread = ProcessThread(name, self._run)

    def request(self, key: K) -> None:
        with self._cond:
            self._pending.add(key)
            self._last = time.monotonic()
            if not self._thread.alive():
                self._busy = False  # a forked child inherits the flag, not the thread
            self._cond.notify_all()
        self._thread.ensure()

    def wait(self, timeout: float | None = None) -> bool:
        """Until nothing is pending or being worked on; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._pending and not self._busy, timeout)

    def _run(self, stop: threading.Event) -> None:
        if self._nice is not None:
            with contextlib.suppress(OSError, AttributeError):  # not Linux: the process's
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), self._nice)
        while not stop.is_set():
            with self._cond:
                self._cond.wait_for(lambda: bool(self._pending))
                first = time.monotonic()
                while (time.monotonic() - self._last < self._quiet
                       and time.monotonic() - first < self._max_delay):
                    self._cond.wait(self._quiet)
                key = self._pending.pop()
                self._busy = True
            try:
                self._work(key)
            except Exception:  # left as it was: the next request or the sweep retries
                log.exception("%s: background work for %s failed", self._thread.name, key)
            finally:
                connection.close()  # this thread's own connection
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
