"""A counting semaphore shared by every process of one host: the cap on model calls in
flight (``PMEM_LLM_CONCURRENCY``, by default ``PMEM_MODEL_CONCURRENCY``) is per worker host,
whatever ``PMEM_WORKERS`` is.

A slot is a lock file, ``n`` of them in a directory of the host's data directory named after
the host and the endpoint; a holder holds one with ``flock``. The kernel drops a process's
locks when it dies, so a killed worker never keeps a slot (a SysV semaphore would need
``SEM_UNDO`` and outlives every process that used it). Within a process a slot is held on
the process's own descriptor of its file and marked taken in memory, so two threads of one
process never take the same slot (``flock`` excludes open file descriptions, not threads).

A caller that finds every slot taken waits on a condition this process's releases signal,
and looks again every ``POLL_S`` for slots freed by other processes: a wait behind another
process is at most that much longer than it need be (small beside a model call). Among the
waiters of one process the most urgent takes the next slot (``URGENCY``, set by the caller's
context: a drain's extraction that a later observation waits for goes before the ones that
only keep the server busy); among processes, whoever looks first.

Why not a semaphore from the broker or the database: measured (``bench/host_semaphore.py``),
an acquire and release here costs ~9 µs; a counting semaphore on the embedded Redis (one Lua
script to take, one call to give back) ~220 µs, 25 times more, on every model call. And a
slot held in Redis outlives a killed worker until a lease expires (a lease that must be longer
than the slowest model call), while the kernel frees a lock file at once; a PostgreSQL
advisory lock per slot would hold a database connection per call in flight, from
``memory.llm``, which runs no SQL. Nothing a library offers serves the cap as well.
"""

from __future__ import annotations

import contextvars
import fcntl
import hashlib
import heapq
import itertools
import os
import socket
import threading
import time
from pathlib import Path
from types import TracebackType

POLL_S = 0.01
#: How urgent the calls of this context are: the least goes first among a process's waiters.
URGENCY: contextvars.ContextVar[tuple[int, ...]] = contextvars.ContextVar(
    "pmem_call_urgency", default=(1, 0))


class HostSemaphore:
    """At most ``size`` holders at once among all processes that use ``directory``."""

    def __init__(self, directory: Path, size: int) -> None:
        self.directory = directory
        self.size = max(1, size)
        self._taken: set[int] = set()
        self._held = threading.local()
        self._cond = threading.Condition()
        self._fds: dict[int, int] = {}
        self._pid = 0
        self._waiting: list[tuple[tuple[int, ...], int]] = []  # (urgency, ticket), a heap
        self._tickets = itertools.count()

    def _descriptors(self) -> dict[int, int]:
        """This process's descriptor of each slot file, opened again after a fork: a child
        sharing its parent's open file descriptions would share its locks too."""
        if self._pid != os.getpid():
            self.directory.mkdir(parents=True, exist_ok=True)
            self._fds = {i: os.open(self.directory / f"{i}.lock", os.O_RDWR | os.O_CREAT
                                    | os.O_CLOEXEC, 0o600) for i in range(self.size)}
            self._taken = set()
            self._pid = os.getpid()
        return self._fds

    def _try_take(self) -> int | None:
        fds = self._descriptors()
        start = threading.get_ident() % self.size  # threads start their search apart
        for step in range(self.size):
            slot = (start + step) % self.size
            if slot in self._taken:
                continue
            try:
                fcntl.flock(fds[slot], fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            self._taken.add(slot)
            return slot
        return None

    def acquire(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            if self._pid != os.getpid():  # a forked child: its parent's waiters are not its own
                self._waiting = []
            me = (URGENCY.get(), next(self._tickets))
            heapq.heappush(self._waiting, me)
            try:
                while True:
                    # Only the most urgent waiter of the process takes a slot.
                    slot = self._try_take() if self._waiting[0] == me else None
                    if slot is not None:
                        self._held.__dict__.setdefault("slots", []).append(slot)
                        return True
                    wait = (POLL_S if deadline is None
                            else min(POLL_S, deadline - time.monotonic()))
                    if wait <= 0:
                        return False
                    self._cond.wait(wait)
            finally:
                self._waiting.remove(me)
                heapq.heapify(self._waiting)
                self._cond.notify_all()  # the next most urgent looks now

    def release(self) -> None:
        slots: list[int] = self._held.__dict__.get("slots", [])
        if not slots:
            raise ValueError("released a host slot this thread does not hold")
        slot = slots.pop()
        with self._cond:
            if self._pid == os.getpid():
                fcntl.flock(self._fds[slot], fcntl.LOCK_UN)
                self._taken.discard(slot)
            self._cond.notify_all()  # the most urgent waiter takes it, not the first woken

    def holders_here(self) -> int:
        """Slots this process holds now."""
        with self._cond:
            return len(self._taken) if self._pid == os.getpid() else 0

    def __enter__(self) -> HostSemaphore:
        self.acquire()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


def slot_directory(root: Path, base_url: str, size: int) -> Path:
    """Where the slots of ``base_url`` live under ``root``: named after the host, so that a
    data directory shared by several hosts still caps each host apart, and after the cap,
    so that processes started with different caps never share files of another count."""
    digest = hashlib.sha1(base_url.rstrip("/").encode()).hexdigest()[:16]
    return root / socket.gethostname() / f"{digest}-{max(1, size)}"
