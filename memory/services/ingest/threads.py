"""The threads a worker process prepares observations on ahead of their commit
(memory.services.ingest.ahead): extractions on one pool, plans on another.

Plans have threads of their own: most make no call and take milliseconds, and the head of a
line waits on its plan, so one must not queue behind the extractions (a second each) that
the process's other lines — adopted namespaces — keep the extraction threads busy with.
Both kinds share the host's cap on calls in flight (memory.llm.hostslots).

Extractions are taken in order of urgency, not of submission (:class:`PriorityPool`): each
line of the process submits its next observations as it sees them, so in first-in first-out
order an observation that arrived first, or one a later observation waits for, would queue
behind whatever other lines submitted before it — at eight namespaces the stream's end
waited on chains whose first link was extracted last.
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
    order of submission). A future cancelled before its call starts is skipped."""

    def __init__(self, size: int, name: str) -> None:
        self.size, self.name = size, name
        self._cond = threading.Condition()
        self._queue: list[tuple[Urgency, int, Future[Any], Callable[..., Any], tuple[Any, ...]]] = []
        self._order = itertools.count()
        self._threads: list[threading.Thread] = []

    def submit(self, urgency: Urgency, fn: Callable[..., T], *args: Any) -> Future[T]:
        future: Future[T] = Future()
        with self._cond:
            heapq.heappush(self._queue, (urgency, next(self._order), future, fn, args))
            if len(self._threads) < self.size:
                thread = threading.Thread(target=self._work, daemon=True,
                                          name=f"{self.name}-{len(self._threads)}")
                self._threads.append(thread)
                thread.start()
            self._cond.notify()
        return future

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._queue:
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
            made = _pools[kind] = (os.getpid(), size, PriorityPool(size, f"pmem-{kind}"))
        return made[2]
