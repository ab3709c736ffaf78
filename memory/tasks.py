"""Thin Celery tasks: take ids, call a service. Idempotent under redelivery (acks_late)."""

from __future__ import annotations

import logging

from celery import Task, shared_task
from celery.signals import worker_ready
from django.conf import settings
from django.db import transaction

from memory.domain import UNSETTLED_STATES
from memory.models import Evidence
from memory.services import (
    ExtractionFailed,
    erase_followup,
    namespace_drain,
    observation_extract,
    observation_fail,
)
from memory.services.frontier import frontier_flush_all

log = logging.getLogger("pmem.tasks")


def _retry_policy() -> tuple[int, float, float]:
    return (int(settings.PMEM_TASK_MAX_RETRIES), float(settings.PMEM_TASK_RETRY_BASE),
            float(settings.PMEM_TASK_RETRY_CAP))


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=None)
def process_observation(self: Task, evidence_id: int) -> str:
    """Extract one observation (once), then commit whatever is next in its namespace.

    While its model is unreachable the task retries with backoff (the namespace waits: later
    observations must not commit first); after ``PMEM_TASK_MAX_RETRIES`` the observation is
    marked failed and the namespace moves on."""
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
    namespace_drain(namespace_id=namespace_id)
    return "ok"


@shared_task(acks_late=True, ignore_result=True)
def flush_frontiers() -> int:
    """Re-index every cell waiting outside the frontier index (run by beat every
    ``PMEM_FRONTIER_FLUSH_EVERY`` seconds; harmless to run at any time)."""
    return frontier_flush_all()


@shared_task(acks_late=True)
def sweep_unsettled() -> int:
    """Re-enqueue every unsettled observation (after a crash or a lost message). Harmless when
    they are already queued: extraction and commitment are both idempotent."""
    ids = list(Evidence.objects.filter(state__in=UNSETTLED_STATES).order_by("seq")
               .values_list("id", flat=True))
    for evidence_id in ids:
        process_observation.delay(evidence_id)
    return len(ids)


@shared_task(acks_late=True, ignore_result=True)
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
