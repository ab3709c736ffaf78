"""Drains a worker process takes on while its own waits on the model.

A prefork worker process runs one task at a time, and a task drains one namespace: while that
namespace's next observation waits on the model, the process could not plan or commit any
other namespace's, however many calls the server could take, so eight small namespaces moved
at the pace of two. Now a task's drain adopts namespaces that have unsettled observations
and that no drain holds, whether or not its own threads are idle (the process's extraction
pool takes every line's work by urgency, memory.services.ingest.threads, so an adopted line
starves nobody, while a namespace left undrained would be extracted last): it drains each on
a thread of this process, as a task would (``namespace_drain``: the namespace's lock, seq
order, the plans checked at each commit), on the same pool of planning threads and under the
same cap of calls per host. The namespace's own tasks find its lock held and leave their
observations to this drain, as they do for any drain.

An adopted drain ends when its line is empty, or at the deadline of the task that adopted it;
what it leaves is handed to a queued drain (``hand_on``), as a task hands on what it could not
finish. A failure (the model unreachable, the time limit) is handed on the same way: the
queued task retries with its backoff, and no more namespaces are adopted by this process for
``PMEM_SWEEP_EVERY``. The threads are daemons: a process that exits mid-drain loses nothing
(the observations are stored; PostgreSQL drops its locks; the sweep finds them).
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from django.conf import settings
from django.db import connection

from memory import metrics

from ..sweep import namespaces_undrained
from .line import LOCK_CLASS, more_to_do

log = logging.getLogger("pmem.observations")


@dataclass(frozen=True)
class Adoption:
    """What an adopted drain inherits from the task that adopted it: when to stop
    (monotonic), when to give up on a head still being prepared, who drains on, and the
    drain it runs (``namespace_drain``: passed in, as the drain is what adopts)."""

    deadline: float
    give_up_at: float | None
    hand_on: Callable[[int], None]
    drain: AdoptedDrain


class AdoptedDrain(Protocol):
    def __call__(self, *, namespace_id: int, deadline: float | None,
                 give_up_at: float | None) -> int: ...


_lock = threading.Lock()
_running: set[int] = set()  # namespaces adopted by this process, being drained
_paused = [0.0]  # monotonic: no adoption before this (a drain adopted here failed)


def adopt(adoption: Adoption, *, drained: int, room: int) -> int:
    """Start drains of up to ``room`` namespaces (not ``drained``, the adopting drain's own,
    nor one this process has adopted already) that have unsettled observations and no
    drain; at most ``PMEM_MODEL_CONCURRENCY`` adopted at once per process. Returns how
    many were started."""
    with _lock:
        now = time.monotonic()
        if now < _paused[0] or now >= adoption.deadline:
            return 0
        room = min(room, int(settings.PMEM_MODEL_CONCURRENCY) - len(_running))
        mine = [drained, *_running]
    if room <= 0:
        return 0
    started = 0
    for namespace_id in namespaces_undrained(mine=mine, lock_class=LOCK_CLASS, limit=room):
        with _lock:
            if namespace_id in _running:
                continue
            _running.add(namespace_id)
        threading.Thread(target=contextvars.copy_context().run,
                         args=(_drain, namespace_id, adoption), daemon=True,
                         name=f"pmem-drain-{namespace_id}").start()
        started += 1
    metrics.DRAINS_ADOPTED.inc(started)
    return started


def adopted() -> set[int]:
    """The namespaces this process's adopted drains are draining now."""
    with _lock:
        return set(_running)


def _drain(namespace_id: int, adoption: Adoption) -> None:
    try:
        adoption.drain(namespace_id=namespace_id, deadline=adoption.deadline,
                       give_up_at=adoption.give_up_at)
        if time.monotonic() >= adoption.deadline and more_to_do(namespace_id):
            adoption.hand_on(namespace_id)
    except Exception as exc:
        log.info("the drain of namespace %s adopted here stopped: %s", namespace_id, exc)
        with _lock:
            _paused[0] = time.monotonic() + max(1.0, float(settings.PMEM_SWEEP_EVERY))
        adoption.hand_on(namespace_id)
    finally:
        with _lock:
            _running.discard(namespace_id)
        connection.close()
