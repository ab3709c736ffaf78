"""The drain with a model: the observations behind the head are extracted and planned ahead,
on threads, while the head commits (SPEC §5.5; docs/decisions.md, "Planning ahead").

A model answers in about a second and serves many requests at once; committing takes a few
milliseconds. So the drain of a namespace keeps up to ``PMEM_MODEL_CONCURRENCY`` of its next
observations in preparation — extraction (under the observation's extraction claim, exactly
as a task takes it: a task extracting one already is waited for, never doubled), soft key
identity and annotation — on this process's pool of threads, each with its own database
connection, and commits them strictly in ``seq`` order, each in its own short transaction.
A plan was made against the state its thread saw; before it is applied, its basis (what it
read: memory.services.basis) is checked, and when an earlier commit changed any of it the
observation is planned again, there and then. The result is the one planning each
observation after the previous one committed would give.

Inside a transaction the caller already holds (a test's), or with a concurrency of 1, the
observations are prepared one at a time on the caller's connection: threads could not see
what that transaction holds.
"""

from __future__ import annotations

import contextvars
import logging
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import replace

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection
from django.utils import timezone

from memory import metrics
from memory.domain import UNSETTLED_STATES
from memory.models import Evidence

from .basis import basis_holds
from .frontier import frontier_flush_if_due
from .observations import (
    _commit,
    _extract_claimed,
    _next_unsettled,
    _prepare,
    _Prepared,
    observation_fail,
)
from .planning import ModelUnavailable
from .sweep import sweep_every

log = logging.getLogger("pmem.observations")

#: Plans made again for one observation before the freshest is applied as it is: only a
#: writer outside the drain (none of ours) could keep changing what it read.
_REPLANS = 3

_pool_lock = threading.Lock()
_pool: tuple[int, int, ThreadPoolExecutor] | None = None  # (pid, size, pool)


def _threads() -> ThreadPoolExecutor:
    """This process's planning threads (made after a fork, never inherited)."""
    global _pool
    size = int(settings.PMEM_MODEL_CONCURRENCY)
    with _pool_lock:
        if _pool is None or _pool[0] != os.getpid() or _pool[1] != size:
            _pool = (os.getpid(), size,
                     ThreadPoolExecutor(max_workers=size, thread_name_prefix="pmem-plan"))
        return _pool[2]


def _threaded() -> bool:
    return int(settings.PMEM_MODEL_CONCURRENCY) > 1 and not connection.in_atomic_block


def _retry_leased(evidence: Evidence) -> bool:
    """Is a task due back for it after a retry's countdown? (Longer than a queued message's
    lease.) The drain leaves such an observation to that task rather than ask the model that
    just failed it again."""
    return (evidence.extracted is None and evidence.lease_until is not None
            and evidence.lease_until > timezone.now() + sweep_every())


def drain_ahead(namespace_id: int, *, room: int | None, deadline: float | None) -> int:
    """Commit the namespace's next observations in seq order, preparing those behind the
    head meanwhile. The caller holds the drain lock. Stops when the line is empty or its
    head is not to be taken now, after ``room`` commits, or at ``deadline`` (monotonic).
    Raises :class:`ModelUnavailable` naming the head when the model cannot be reached."""
    width = max(1, int(settings.PMEM_MODEL_CONCURRENCY))
    threaded = _threaded()
    pending: dict[int, Future[_Prepared | None]] = {}
    committed = 0
    try:
        while room is None or committed < room:
            line = _next_unsettled(namespace_id, width if threaded else 1)
            if not line or _retry_leased(line[0]):
                break
            head = line[0]
            if threaded:
                for evidence in line:
                    if evidence.pk not in pending and not _retry_leased(evidence):
                        context = contextvars.copy_context()
                        pending[evidence.pk] = _threads().submit(context.run, _ready,
                                                                 evidence.pk, True)
            prepared = _await(pending.pop(head.pk, None), head.pk, deadline)
            if prepared is _LATE:
                break
            if prepared is None:
                continue  # it settled meanwhile (an unusable answer failed it)
            assert isinstance(prepared, _Prepared)
            committed += _commit_checked(prepared)
            frontier_flush_if_due(namespace_id=namespace_id)
            if deadline is not None and time.monotonic() >= deadline:
                break
    finally:
        for future in pending.values():
            future.cancel()  # not started yet; a running one finishes and is forgotten
    return committed


_LATE = object()  # the head was not ready by the deadline


def _await(future: Future[_Prepared | None] | None, evidence_id: int,
           deadline: float | None) -> object:
    """The head, prepared (here when no thread took it); ``_LATE`` past the deadline."""
    try:
        if future is None:
            return _ready(evidence_id, False)
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        return future.result(timeout=timeout)
    except FutureTimeout:
        return _LATE
    except ModelUnavailable as exc:
        exc.evidence_id = exc.evidence_id or evidence_id
        raise
    except (OperationalError, InterfaceError):
        raise
    except Exception as exc:  # a bug must not hold the namespace back forever
        log.exception("preparing evidence %s failed", evidence_id)
        observation_fail(evidence_id=evidence_id, reason="commit",
                         error=f"commit failed: {type(exc).__name__}: {exc}")
        return None


def _ready(evidence_id: int, threaded: bool) -> _Prepared | None:
    """Extract (if nobody has) and plan one observation; None when it settled meanwhile.
    On a thread, the connection is closed after: nothing of it outlives the job."""
    try:
        evidence = Evidence.objects.defer("embedding").select_related("namespace").get(
            pk=evidence_id)
        if evidence.state not in UNSETTLED_STATES:
            return None
        if evidence.extracted is None:
            _extract_waiting(evidence_id)
            evidence = Evidence.objects.defer("embedding").select_related("namespace").get(
                pk=evidence_id)
            if evidence.state not in UNSETTLED_STATES:
                return None
        return _prepare(evidence, local=False)
    finally:
        if threaded:
            connection.close()


def _extract_waiting(evidence_id: int) -> None:
    """Extract it under its claim, waiting for a task that holds the claim to finish (it
    then finds the extraction stored, and makes no call)."""
    with connection.cursor() as cur:
        cur.execute("SELECT pg_advisory_lock(%s::bigint)", [evidence_id])
    try:
        _extract_claimed(evidence_id)
    finally:
        with connection.cursor() as cur:
            cur.execute("SELECT pg_advisory_unlock(%s::bigint)", [evidence_id])


def _commit_checked(prepared: _Prepared) -> int:
    """Commit a prepared observation once what its plan read still holds; plan it again
    (now, in turn) when it does not. Returns 1, or 0 when it failed (it is marked so)."""
    evidence = prepared.evidence
    try:
        for _ in range(_REPLANS):
            basis = prepared.plan.basis if prepared.plan is not None else None
            if basis is None or basis_holds(evidence.namespace, basis):
                break
            metrics.PLANS_REDONE.inc()
            prepared = _again(prepared)
        _commit([prepared])
        return 1
    except ModelUnavailable as exc:
        exc.evidence_id = exc.evidence_id or evidence.pk
        raise
    except (OperationalError, InterfaceError):
        raise
    except Exception as exc:
        log.exception("commit of evidence %s failed", evidence.pk)
        observation_fail(evidence_id=evidence.pk, reason="commit",
                         error=f"commit failed: {type(exc).__name__}: {exc}")
        return 0


def _again(prepared: _Prepared) -> _Prepared:
    """The observation planned anew on the state now; both plans' costs are kept."""
    fresh = _prepare(prepared.evidence, local=False)
    was, now = prepared.settled, fresh.settled
    return replace(fresh, settled=replace(
        now, chat_calls=was.chat_calls + now.chat_calls,
        embed_calls=was.embed_calls + now.embed_calls,
        prompt_tokens=was.prompt_tokens + now.prompt_tokens,
        completion_tokens=was.completion_tokens + now.completion_tokens))
