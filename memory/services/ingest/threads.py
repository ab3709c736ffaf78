"""The threads a worker process prepares observations on ahead of their commit
(memory.services.ingest.ahead): extractions on one pool, plans on another.

Plans have threads of their own: most make no call and take milliseconds, and the head of a
line waits on its plan, so one must not queue behind the extractions (a second each) that
the process's other lines — adopted namespaces — keep the extraction threads busy with.
Both kinds share the host's cap on calls in flight (memory.llm.hostslots).

Extractions are taken in order of urgency, not of submission (:class:`PriorityPool`): each
line of the process submits its next observations as it sees them, so in first-in first-out
order an observation that arrived first, or one a later observation waits for, would queue
behind whatever other lines submitted before it, and a stream would end on a chain of calls
made one after the other, its first link started last.
"""

from __future__ import annotations

import heapq
import itertools
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Literal, TypeVar

from django.conf import settings

T = TypeVar("T")
Urgency = tuple[int, ...]

_lock = threading.Lock()
_pools: dict[str, tuple[int, int, PriorityPool]] = {}  # kind -> (pid, size, pool)


def depth(width: int) -> int:
    """The extractions a line may have started at once, for ``width`` calls in flight: more,
    as each also spends time here (storing the answer, embedding its facts) without the
    call's slot, which the next one takes meanwhile; the host's cap on calls
    (memory.llm.hostslots) keeps the calls to ``width``."""
    return width + width // 2


class PriorityPool:
    """``size`` daemon threads running submitted calls, the least ``urgency`` first (ties in
    order of submission). A future cancelled before its call starts is skipped.

    ``extra`` threads more take urgent calls only (``urgency[0] == 0``): the pool's other
    threads may all be waiting for the host's slots with calls that only keep the server
    busy (memory.llm.hostslots); an urgent call goes before those there (``URGENCY``), but
    only once a thread has taken it."""

    def __init__(self, size: int, name: str, extra: int = 0) -> None:
        self.size, self.name, self.extra = size, name, extra
        self._cond = threading.Condition()
        self._queue: list[tuple[Urgency, int, Future[Any], Callable[..., Any], tuple[Any, ...]]] = []
        self._order = itertools.count()
        self._threads: list[threading.Thread] = []
        self._reserved: list[threading.Thread] = []

    def submit(self, urgency: Urgency, fn: Callable[..., T], *args: Any) -> Future[T]:
        future: Future[T] = Future()
        with self._cond:
            heapq.heappush(self._queue, (urgency, next(self._order), future, fn, args))
            if len(self._threads) < self.size:
                self._start(self._threads, urgent_only=False)
            elif urgency[:1] == (0,) and len(self._reserved) < self.extra:
                self._start(self._reserved, urgent_only=True)
            self._cond.notify_all()
        return future

    def _start(self, threads: list[threading.Thread], *, urgent_only: bool) -> None:
        thread = threading.Thread(target=self._work, args=(urgent_only,), daemon=True,
                                  name=f"{self.name}-{len(self._threads) + len(self._reserved)}")
        threads.append(thread)
        thread.start()

    def _work(self, urgent_only: bool) -> None:
        while True:
            with self._cond:
                while not self._queue or (urgent_only and self._queue[0][0][:1] != (0,)):
                    self._cond.wait()
                _, _, future, fn, args = heapq.heappop(self._queue)
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args)
            except BaseException as exc:  # handed to whoever waits on the future
                future.set_exception(exc)
            else:
                future.set_result(result)


def pool(kind: Literal["extract", "plan"]) -> PriorityPool:
    """This process's threads of one kind (made after a fork, never inherited)."""
    width = int(settings.PMEM_MODEL_CONCURRENCY)
    size = depth(width) if kind == "extract" else width
    with _lock:
        made = _pools.get(kind)
        if made is None or made[0] != os.getpid() or made[1] != size:
            made = _pools[kind] = (os.getpid(), size, PriorityPool(
                size, f"pmem-{kind}", extra=width // 2 if kind == "extract" else 0))
        return made[2]
