"""Thin Celery tasks: take ids, call a service. Idempotent under redelivery (acks_late).

Every task runs under Celery's soft and hard time limits (``PMEM_TASK_SOFT_TIME_LIMIT``,
``PMEM_TASK_TIME_LIMIT``; docs/decisions.md, "Time limits"). An observation whose processing
runs past them is marked failed with the reason and its namespace moves on: a single input
never holds a worker process, nor the namespace queued behind it, for longer than that.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from billiard.exceptions import SoftTimeLimitExceeded, TimeLimitExceeded
from celery import Task, shared_task
from celery.signals import worker_init, worker_ready
from django.conf import settings
from django.db import connection, transaction

from memory.domain import UNSETTLED_STATES
from memory.llm.extraction import runs_locally
from memory.models import Evidence
from memory.services import (
    ExtractionFailed,
    erase_followup,
    namespace_drain,
    observation_extract,
    observation_fail,
)
from memory.services.frontier import frontier_flush_all
from memory.services.limits import namespace_head_fail, observation_fail_if_unextracted

log = logging.getLogger("pmem.tasks")


def _retry_policy() -> tuple[int, float, float]:
    return (int(settings.PMEM_TASK_MAX_RETRIES), float(settings.PMEM_TASK_RETRY_BASE),
            float(settings.PMEM_TASK_RETRY_CAP))


def _soft_limit() -> float | None:
    return settings.CELERY_TASK_SOFT_TIME_LIMIT


def _hard_limit() -> float | None:
    return settings.CELERY_TASK_TIME_LIMIT


def _drain_chunk() -> int:
    """Observations per ``namespace_drain`` call: between two calls the task checks its time
    budget. Without a model a commit is a few milliseconds (several groups per call); with
    one it is model calls, so the budget is checked after each observation."""
    return max(1, 4 * int(settings.PMEM_COMMIT_GROUP)) if runs_locally() else 1


class TimeLimitedTask(Task):
    """Every task of ours. Its time limits are those of the worker that runs it: a message
    carries none (Celery would stamp the sender's settings on it, which then win).

    The hard time limit kills the worker process outright, so nothing of the task runs after
    it: Celery calls ``on_failure`` in the worker's main process instead, and there the
    observation is marked failed and its namespace handed to a fresh task."""

    def apply_async(self, args: Any = None, kwargs: Any = None, **options: Any) -> Any:
        options.setdefault("time_limit", None)  # None, given: no limit in the message
        options.setdefault("soft_time_limit", None)
        return super().apply_async(args, kwargs, **options)

    def on_failure(self, exc: BaseException, task_id: str, args: Any, kwargs: Any,
                   einfo: Any) -> None:
        if not isinstance(exc, TimeLimitExceeded) or not args:
            return
        try:
            _after_hard_limit(self.name, int(args[0]))
        except Exception:  # the worker's main process must survive whatever happens here
            log.exception("could not record the hard time limit of %s%s", self.name, args)
        finally:
            # Not kept in the main process: a pool child forked later would inherit it.
            connection.close()


def _after_hard_limit(task_name: str, ident: int) -> None:
    reason = (f"time limit: the worker process was killed after {_hard_limit():g} s "
              "(PMEM_TASK_TIME_LIMIT)")
    if task_name == process_observation.name:
        namespace_id = (Evidence.objects.filter(pk=ident)
                        .values_list("namespace_id", flat=True).first())
        if namespace_id is None:
            return
        if not observation_fail_if_unextracted(evidence_id=ident, error=reason):
            namespace_head_fail(namespace_id=namespace_id, error=reason)  # killed in the drain
    else:  # drain_namespace
        namespace_id = ident
        namespace_head_fail(namespace_id=namespace_id, error=reason)
    drain_namespace.delay(namespace_id)


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=None,
             base=TimeLimitedTask)
def process_observation(self: Task, evidence_id: int) -> str:
    """Extract one observation (once), then commit whatever is next in its namespace.

    While its model is unreachable the task retries with backoff (the namespace waits: later
    observations must not commit first); after ``PMEM_TASK_MAX_RETRIES`` the observation is
    marked failed and the namespace moves on. Past the soft time limit it is marked failed
    at once, and a fresh task drains the namespace."""
    started = time.monotonic()
    try:
        namespace_id = Evidence.objects.values_list("namespace_id", flat=True).get(pk=evidence_id)
    except Evidence.DoesNotExist:
        return "missing"
    try:
        observation_extract(evidence_id=evidence_id)
    except ExtractionFailed as exc:
        max_retries, base, cap = _retry_policy()
        if self.request.retries >= max_retries:
            observation_fail(evidence_id=evidence_id, error=f"extraction failed: {exc}")
        else:
            raise self.retry(countdown=min(cap, base * 2 ** self.request.retries),
                             exc=exc) from exc
    except Exception as exc:
        if not _past_soft_limit(exc, started):
            raise
        connection.close()  # it may have been cut off in the middle of a query
        observation_fail(evidence_id=evidence_id, error=(
            f"time limit: extracting it took over {_soft_limit():g} s "
            "(PMEM_TASK_SOFT_TIME_LIMIT)"))
        drain_namespace.delay(namespace_id)
        return "time limit"
    return _drain(namespace_id, started)


@shared_task(acks_late=True, reject_on_worker_lost=True, base=TimeLimitedTask)
def drain_namespace(namespace_id: int) -> str:
    """Commit what is next in the namespace (a drain's continuation, or the namespace's turn
    after an observation failed on a time limit)."""
    return _drain(namespace_id, time.monotonic())


def _past_soft_limit(exc: BaseException, started: float) -> bool:
    """Did the soft limit end the task's work? Its exception, or, when the limit cut a query
    off, the error of the connection it left mid-query (a ``finally`` using it raises that
    one instead): any exception once the limit has passed. (Celery counts from the moment
    the task was accepted, a little before ``started``: one second's slack.)"""
    soft = _soft_limit()
    return isinstance(exc, SoftTimeLimitExceeded) or (
        soft is not None and time.monotonic() - started >= soft - 1.0)


def _drain(namespace_id: int, started: float) -> str:
    """Drain in chunks for at most half the soft time limit, then hand the rest to a fresh
    task: a namespace with a long queue never runs into the limit by its length alone.
    When the limit strikes in a commit anyway, the observation being committed (the lowest
    unsettled seq: the drain commits strictly in seq order) fails with the reason."""
    soft = _soft_limit()
    deadline = None if soft is None else started + soft / 2
    chunk = _drain_chunk()
    try:
        while namespace_drain(namespace_id=namespace_id, limit=chunk) >= chunk:
            if deadline is not None and time.monotonic() >= deadline:
                drain_namespace.delay(namespace_id)
                return "continued"
    except Exception as exc:
        if not _past_soft_limit(exc, started):
            raise
        connection.close()
        namespace_head_fail(namespace_id=namespace_id, error=(
            f"time limit: committing it took over {soft:g} s (PMEM_TASK_SOFT_TIME_LIMIT)"))
        drain_namespace.delay(namespace_id)
        return "time limit"
    return "ok"


@shared_task(acks_late=True, ignore_result=True, base=TimeLimitedTask)
def flush_frontiers() -> int:
    """Re-index every cell waiting outside the frontier index (run by beat every
    ``PMEM_FRONTIER_FLUSH_EVERY`` seconds; harmless to run at any time)."""
    return frontier_flush_all()


@shared_task(acks_late=True, base=TimeLimitedTask)
def sweep_unsettled() -> int:
    """Re-enqueue every unsettled observation (after a crash or a lost message). Harmless when
    they are already queued: extraction and commitment are both idempotent."""
    ids = list(Evidence.objects.filter(state__in=UNSETTLED_STATES).order_by("seq")
               .values_list("id", flat=True))
    for evidence_id in ids:
        process_observation.delay(evidence_id)
    return len(ids)


@shared_task(acks_late=True, ignore_result=True, base=TimeLimitedTask)
def finish_erasures() -> dict[str, int]:
    """What privacy erases leave for later: re-embed the observations they redacted, VACUUM
    the dead tuples that still hold the erased values (enqueued on each erase's commit, and
    run by beat every ``PMEM_ERASE_FOLLOWUP_EVERY`` seconds; harmless to run at any time)."""
    return erase_followup()


def enqueue_erase_followup() -> None:
    """Queue :func:`finish_erasures` once the erase has committed. A broker that is down
    loses nothing: beat runs it again."""

    def send() -> None:
        try:
            finish_erasures.delay()
        except Exception:
            log.exception("could not enqueue the erase follow-up; beat will run it")

    transaction.on_commit(send)


def enqueue_observation(evidence_id: int) -> None:
    """Queue processing once the surrounding transaction (if any) has committed."""
    transaction.on_commit(lambda: process_observation.delay(evidence_id))


@worker_ready.connect
def _sweep_on_start(**_: object) -> None:
    sweep_unsettled.delay()


@worker_init.connect
def _preload_model_client(**_: object) -> None:
    """Import the model client in the worker's main process, before the pool forks: every
    pool process inherits it, where each would otherwise import it at its first model call
    (seconds on a busy machine, counted against that task's time limit)."""
    import memory.llm.client  # noqa: F401
