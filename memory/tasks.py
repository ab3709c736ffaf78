"""Thin Celery tasks: take ids, call a service. Idempotent under redelivery (acks_late).

Every task runs under Celery's soft and hard time limits (``PMEM_TASK_SOFT_TIME_LIMIT``,
``PMEM_TASK_TIME_LIMIT``; docs/decisions.md, "Time limits"). An observation whose processing
runs past them is marked failed with the reason and its namespace moves on: a single input
never holds a worker process, nor the namespace queued behind it, for longer than that.

Outages never end a task's work (docs/decisions.md, "Outages"): a model that cannot be
reached is retried with backoff ``PMEM_TASK_MAX_RETRIES`` times before the observation fails;
a database or broker that cannot be reached is retried for as long as it lasts. A retry
leases the observation for its countdown, so the sweep (``sweep_unsettled``, beat every
``PMEM_SWEEP_EVERY`` seconds) leaves it alone — and queues it again when the retry's message
was lost with the broker.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from billiard.exceptions import SoftTimeLimitExceeded, TimeLimitExceeded
from celery import Task, shared_task
from celery.exceptions import Retry
from celery.signals import worker_init, worker_ready
from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection, transaction
from kombu.exceptions import OperationalError as BrokerError

from memory import metrics
from memory.domain import UNSETTLED_STATES
from memory.llm.extraction import runs_locally
from memory.models import Evidence
from memory.services import (
    ModelUnavailable,
    erase_followup,
    namespace_drain,
    observation_extract,
    observation_fail,
)
from memory.services.changes import erase_keys_forget
from memory.services.expiry import expire_due_everywhere
from memory.services.frontier import frontier_flush_all
from memory.services.ingest import namespace_draining
from memory.services.ingest.adopt import Adoption
from memory.services.ingest.ahead import PreparationTimedOut
from memory.services.limits import namespace_head_fail, observation_fail_if_unextracted
from memory.services.namespace_delete import deletions_resume, deletions_vacuum
from memory.services.sweep import observation_lease, observation_lease_end, observations_unheld
from memory.services.webhooks import (
    webhook_claim,
    webhook_log_prune,
    webhook_queue,
    webhooks_deliver,
    webhooks_due,
)

log = logging.getLogger("pmem.tasks")


def _retry_policy() -> tuple[int, float, float]:
    return (int(settings.PMEM_TASK_MAX_RETRIES), float(settings.PMEM_TASK_RETRY_BASE),
            float(settings.PMEM_TASK_RETRY_CAP))


def _soft_limit() -> float | None:
    return settings.CELERY_TASK_SOFT_TIME_LIMIT


def _hard_limit() -> float | None:
    return settings.CELERY_TASK_TIME_LIMIT


def _drain_chunk() -> int:
    """Observations per ``namespace_drain`` call without a model: between two calls the task
    checks its time budget (with a model the drain checks it after each commit itself)."""
    return max(1, 4 * int(settings.PMEM_COMMIT_GROUP))


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
    queue_drain(namespace_id)


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=None,
             base=TimeLimitedTask)
def process_observation(self: Task, evidence_id: int) -> str:
    """Extract one observation (once), then commit whatever is next in its namespace.

    While the model is unreachable (for this observation's extraction, or for the head of the
    line the drain prepares) the task retries with backoff; the namespace waits: later
    observations must not commit first. After ``PMEM_TASK_MAX_RETRIES`` that observation is
    marked failed and the namespace moves on. A database or broker outage is retried for as
    long as it lasts. Past the soft time limit the observation is marked failed at once, and
    a fresh task drains the namespace."""
    started = time.monotonic()
    try:
        namespace_id = Evidence.objects.values_list("namespace_id", flat=True).get(pk=evidence_id)
        if not runs_locally():
            # A task that gets the drain prepares its observation there, with those behind
            # it, in parallel; one that finds another task draining leaves it to that one
            # (extracting it here would only hold this process, and the drain's pipeline
            # behind it, to one call at a time).
            drained = _drain(namespace_id, started)
            if not _unsettled(evidence_id) or namespace_draining(namespace_id):
                return drained  # done, or the drain of another task will prepare it
        try:
            observation_extract(evidence_id=evidence_id)
        except Exception as exc:
            if not _past_soft_limit(exc, started):
                raise
            connection.close()  # it may have been cut off in the middle of a query
            observation_fail(evidence_id=evidence_id, reason="time_limit", error=(
                f"time limit: extracting it took over {_soft_limit():g} s "
                "(PMEM_TASK_SOFT_TIME_LIMIT)"))
            queue_drain(namespace_id)
            return "time limit"
        return _drain(namespace_id, started)
    except Evidence.DoesNotExist:
        return "missing"
    except Exception as exc:
        done = _retry_or_fail(self, exc, evidence_id)
        if done is None:
            raise
        return done


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=None,
             base=TimeLimitedTask)
def drain_namespace(self: Task, namespace_id: int) -> str:
    """Commit what is next in the namespace (a drain's continuation, or the namespace's turn
    after an observation failed on a time limit). Outages are retried as in
    :func:`process_observation`."""
    try:
        return _drain(namespace_id, time.monotonic())
    except Exception as exc:
        done = _retry_or_fail(self, exc, None)
        if done is None:
            raise
        return done


def _unsettled(evidence_id: int) -> bool:
    return Evidence.objects.filter(pk=evidence_id, state__in=UNSETTLED_STATES).exists()


def _outage(exc: BaseException) -> str | None:
    """``model``, ``database`` or ``broker`` when ``exc`` says that dependency cannot be
    reached now (trying again later may help), else None."""
    if isinstance(exc, ModelUnavailable):
        return "model"
    if isinstance(exc, OperationalError | InterfaceError):
        return "database"
    if isinstance(exc, BrokerError | ConnectionError):
        return "broker"
    return None


def _retry_or_fail(task: Task, exc: Exception, evidence_id: int | None) -> str | None:
    """Schedule the task again after an outage (raises :class:`celery.exceptions.Retry`),
    or fail the observation a model outage is about once the retries ran out (returns what
    the task returns). Returns None (the caller re-raises ``exc``) when it is no outage."""
    if isinstance(exc, Retry):
        return None
    cause = _outage(exc)
    if cause is None:
        return None
    max_retries, base, cap = _retry_policy()
    countdown = min(cap, base * 2 ** min(task.request.retries, 16))
    blamed = getattr(exc, "evidence_id", None) or evidence_id
    if cause == "model" and task.request.retries >= max_retries:
        if blamed is not None:
            observation_fail(evidence_id=blamed, error=str(exc), reason="model")
        if blamed is not None:
            namespace = (Evidence.objects.filter(pk=blamed)
                         .values_list("namespace_id", flat=True).first())
            if namespace is not None:
                queue_drain(namespace)
        return "failed"
    if cause == "database":
        connection.close()  # the next try reconnects
    log.warning("%s: %s unavailable (%s); retrying in %.1f s", task.name, cause, exc, countdown)
    metrics.TASK_RETRIES.labels(cause=cause).inc()
    for ident in {blamed, evidence_id} - {None}:
        try:
            observation_lease(evidence_id=int(ident or 0), seconds=countdown)
        except DatabaseError:
            connection.close()  # no lease: the sweep may queue it once more, harmless
    raise task.retry(countdown=countdown, exc=exc, max_retries=None)


def queue_drain(namespace_id: int) -> None:
    """Queue a fresh drain of the namespace; a broker that is down loses nothing (the sweep
    finds the namespace's observations once their leases run out)."""
    try:
        drain_namespace.delay(namespace_id)
    except Exception:
        log.warning("could not queue the drain of namespace %s; the sweep will", namespace_id,
                    exc_info=True)


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
        if not runs_locally():  # the drain keeps observations in preparation: one long call
            give_up_at = None if soft is None else started + soft - 1.0
            namespace_drain(namespace_id=namespace_id, deadline=deadline, give_up_at=give_up_at,
                            adoption=None if deadline is None else Adoption(
                                deadline=deadline, give_up_at=give_up_at, hand_on=queue_drain,
                                drain=namespace_drain))
            if deadline is not None and time.monotonic() >= deadline:
                queue_drain(namespace_id)
                return "continued"
            return "ok"
        while namespace_drain(namespace_id=namespace_id, limit=chunk) >= chunk:
            if deadline is not None and time.monotonic() >= deadline:
                queue_drain(namespace_id)
                return "continued"
    except Exception as exc:
        if not _past_soft_limit(exc, started):
            raise
        connection.close()
        error = (f"time limit: preparing or committing it took over {soft:g} s"
                 " (PMEM_TASK_SOFT_TIME_LIMIT)")
        if isinstance(exc, PreparationTimedOut):  # the drain says which one
            observation_fail(evidence_id=exc.evidence_id, error=error, reason="time_limit")
        else:
            namespace_head_fail(namespace_id=namespace_id, error=error)
        queue_drain(namespace_id)
        return "time limit"
    return "ok"


@shared_task(acks_late=True, ignore_result=True, base=TimeLimitedTask)
def flush_frontiers() -> int:
    """Re-index every cell waiting outside the frontier index (run by beat every
    ``PMEM_FRONTIER_FLUSH_EVERY`` seconds; harmless to run at any time)."""
    return frontier_flush_all()


@shared_task(acks_late=True, base=TimeLimitedTask)
def sweep_unsettled(every_lease: bool = True) -> int:
    """Queue again every unsettled observation that no live task holds (memory.services.
    sweep): beat runs it every ``PMEM_SWEEP_EVERY`` seconds; a starting worker runs it with
    ``every_lease=False`` (after a crash every lease may be stale), taking every observation
    no running task holds. Harmless when they are queued already: extraction and commitment
    are both idempotent. Returns how many it queued."""
    ids = observations_unheld(leased=every_lease)
    for sent, evidence_id in enumerate(ids):
        try:
            process_observation.delay(evidence_id)
        except Exception:
            log.warning("the sweep could not queue evidence %s; the next sweep will",
                        evidence_id, exc_info=True)
            for rest in ids[sent:]:
                observation_lease_end(evidence_id=rest)
            return sent
    if ids:
        log.info("the sweep queued %d unsettled observation(s) no live task held", len(ids))
        metrics.OBSERVATIONS_REQUEUED.inc(len(ids))
    return len(ids)


@shared_task(acks_late=True, ignore_result=True, base=TimeLimitedTask)
def blank_erased_change_keys() -> int:
    """The change feed's ``erase`` events lose their key after
    ``PMEM_CHANGES_ERASE_RETENTION``, and leave the table's files (beat; harmless to run at
    any time)."""
    return erase_keys_forget()


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


@shared_task(acks_late=True, ignore_result=True, base=TimeLimitedTask)
def finish_namespace_deletions() -> dict[str, int]:
    """What namespace deletions leave for later: finish one that stopped half-way (a worker
    killed), then VACUUM the dead tuples that still hold what they deleted (enqueued on each
    deletion, and run by beat with the erase follow-up; harmless to run at any time)."""
    return {"resumed": deletions_resume(), "vacuumed": deletions_vacuum()}


def enqueue_namespace_followup() -> None:
    """Queue :func:`finish_namespace_deletions`; a broker that is down loses nothing: beat
    runs it again."""
    try:
        finish_namespace_deletions.delay()
    except Exception:
        log.exception("could not enqueue the namespace deletion follow-up; beat will run it")


@shared_task(acks_late=True, ignore_result=True, base=TimeLimitedTask)
def expire_facts() -> int:
    """Record the ``expire`` operation of every version whose expiry passed (SPEC §13; beat
    every ``PMEM_EXPIRY_EVERY`` seconds). Reads never wait for it: each read expires what is
    due in its namespace first (memory.services.expiry). Returns how many it expired."""
    return expire_due_everywhere()


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=None,
             ignore_result=True, base=TimeLimitedTask)
def deliver_webhook(self: Task, endpoint_id: int) -> str:
    """Deliver one endpoint's due events in cursor order (memory.services.webhooks), one at a
    time, for at most half the soft time limit, then hand on to a fresh task. Another worker
    delivering it already: nothing to do. A failed attempt is scheduled again here when its
    wait is short, else by beat (:func:`kick_webhooks`); an outage of the database or broker is
    retried as long as it lasts."""
    soft = _soft_limit()
    deadline = time.monotonic() + (soft / 2 if soft else 60.0)
    try:
        with webhook_claim(endpoint_id) as held:
            if not held:
                return "busy"
            run = webhooks_deliver(endpoint_id=endpoint_id, deadline=deadline)
    except Exception as exc:
        if _retry_or_fail(self, exc, None) is None:  # raises Retry after an outage
            raise
        return "failed"
    # A commit's wake-up that found this task holding the claim was dropped ("busy"); its
    # event committed before the claim was let go, so looking once more now finds it.
    if run.outcome == "continued" or (run.outcome == "idle" and webhooks_due(endpoint_id)):
        webhook_queue(endpoint_id)
    elif run.retry_in is not None and run.retry_in < float(settings.PMEM_WEBHOOK_EVERY):
        # A wait shorter than beat's round is queued here; beat queues the longer ones when
        # they are due (a message held for minutes is one a broker may lose).
        webhook_queue(endpoint_id, countdown=run.retry_in)
    return run.outcome


@shared_task(acks_late=True, ignore_result=True, base=TimeLimitedTask)
def kick_webhooks() -> int:
    """Queue every endpoint that is due and has events to deliver (beat, every
    ``PMEM_WEBHOOK_EVERY`` seconds: retries that are due, messages a broker lost, wake-ups
    missed), and keep each endpoint's delivery log short. Returns how many it queued."""
    due = webhooks_due()
    for endpoint_id in due:
        if not webhook_queue(endpoint_id):
            break
    webhook_log_prune()
    return len(due)


def enqueue_observation(evidence_id: int) -> None:
    """Queue processing once the surrounding transaction (if any) has committed. A broker
    that is down loses nothing: the observation is stored, and the next sweep queues it."""
    transaction.on_commit(lambda: queue_observation(evidence_id))


def queue_observation(evidence_id: int) -> bool:
    """Queue processing of a stored observation now; False when the broker refused (the
    observation's lease is ended, so the next sweep queues it)."""
    try:
        process_observation.delay(evidence_id)
        return True
    except Exception:
        log.warning("could not enqueue evidence %s; the sweep will queue it", evidence_id,
                    exc_info=True)
    try:
        observation_lease_end(evidence_id=evidence_id)
    except DatabaseError:
        log.warning("could not end the lease of evidence %s either", evidence_id)
    return False


@worker_ready.connect
def _sweep_on_start(**_: object) -> None:
    try:
        sweep_unsettled.delay(every_lease=False)
        kick_webhooks.delay()  # deliveries a crash cut off carry on without waiting for beat
    except Exception:
        log.warning("could not queue the start-up sweep; beat's sweep will run", exc_info=True)


@worker_init.connect
def _preload_model_client(**_: object) -> None:
    """Import the model client in the worker's main process, before the pool forks: every
    pool process inherits it, where each would otherwise import it at its first model call
    (seconds on a busy machine, counted against that task's time limit)."""
    import memory.llm.client  # noqa: F401
