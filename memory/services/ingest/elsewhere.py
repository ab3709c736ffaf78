"""Extractions a drain's idle threads make for other namespaces' observations: the oldest ones
no drain and no task is extracting (memory.services.ingest.ahead). Their namespaces' drains
find the extraction stored and make no call for it."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from functools import partial

from django.conf import settings
from django.db import connection

from ..shown import elsewhere
from ..sweep import observations_unclaimed_elsewhere
from .extract import observation_extract

log = logging.getLogger("pmem.observations")

_elsewhere_lock = threading.Lock()
_elsewhere_taken: set[int] = set()  # submitted by a drain of this process, not done
_elsewhere_paused = [0.0]  # monotonic: no extraction for other namespaces before this


def _untake(evidence_id: int, _: Future[None]) -> None:
    with _elsewhere_lock:
        _elsewhere_taken.discard(evidence_id)


def extracted_elsewhere(evidence_id: int) -> None:
    """On a thread: extract another namespace's observation if nobody has claimed it (one
    that is claimed is being extracted; the drain of its namespace will find it stored).
    What goes wrong is left to that namespace's own task: it extracts it again, and its
    retries and time limits apply there. A model that failed here is left alone by this
    process's drains for ``PMEM_SWEEP_EVERY``: they would only add calls to a server in
    trouble, ahead of the tasks whose retries wait it out. One that an earlier observation
    of its namespace, not committed yet, may name a key of is shown that one's facts as
    accepted, or left to its drain while that one is not extracted (memory.services.shown)."""
    try:
        shown = elsewhere(evidence_id, int(settings.PMEM_MODEL_CONCURRENCY))
        if shown is not None:
            observation_extract(evidence_id=evidence_id, ahead=shown)
    except Exception as exc:
        log.info("extracting evidence %s ahead of its namespace failed: %s", evidence_id, exc)
        with _elsewhere_lock:
            _elsewhere_paused[0] = time.monotonic() + max(1.0, float(settings.PMEM_SWEEP_EVERY))
    finally:
        connection.close()


def extract_elsewhere(namespace_id: int, limit: int,
                      submit: Callable[[int], Future[None]]) -> dict[int, Future[None]]:
    """Start (``submit``: on the drain's pool) the extraction of up to ``limit`` of the
    oldest unclaimed observations of namespaces other than ``namespace_id``, none another
    drain of this process has started; their futures by observation."""
    with _elsewhere_lock:
        if time.monotonic() < _elsewhere_paused[0]:
            return {}
        taken = list(_elsewhere_taken)
    started: dict[int, Future[None]] = {}
    for pk in observations_unclaimed_elsewhere(namespace_id=namespace_id, limit=limit,
                                               skip=taken):
        with _elsewhere_lock:
            _elsewhere_taken.add(pk)
        future = submit(pk)
        future.add_done_callback(partial(_untake, pk))  # also when cancelled unstarted
        started[pk] = future
    return started
