"""Thin Celery tasks: take ids, call a service. Idempotent under redelivery (acks_late)."""

from __future__ import annotations

import logging

from celery import shared_task
from celery.signals import worker_ready
from django.db import transaction

from memory.models import Evidence
from memory.services import (
    ExtractionFailed,
    namespace_drain,
    observation_extract,
    observation_fail,
)

log = logging.getLogger("pmem.tasks")
MAX_RETRIES = 4


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=MAX_RETRIES)
def process_observation(self, evidence_id: int) -> str:  # type: ignore[no-untyped-def]
    """Extract one observation (once), then commit whatever is next in its namespace."""
    try:
        namespace_id = Evidence.objects.values_list("namespace_id", flat=True).get(pk=evidence_id)
    except Evidence.DoesNotExist:
        return "missing"
    try:
        observation_extract(evidence_id=evidence_id)
    except ExtractionFailed as exc:
        if self.request.retries >= MAX_RETRIES:
            observation_fail(evidence_id=evidence_id, error=f"extraction failed: {exc}")
        else:
            raise self.retry(countdown=min(30, 2 ** self.request.retries), exc=exc) from exc
    namespace_drain(namespace_id=namespace_id)
    return "ok"


@shared_task(acks_late=True)
def sweep_unsettled() -> int:
    """Re-enqueue every unsettled observation (after a crash or a lost message). Harmless when
    they are already queued: extraction and commitment are both idempotent."""
    ids = list(Evidence.objects.filter(state__in=["pending", "processing"]).order_by("seq")
               .values_list("id", flat=True))
    for evidence_id in ids:
        process_observation.delay(evidence_id)
    return len(ids)


def enqueue_observation(evidence_id: int) -> None:
    """Queue processing once the surrounding transaction (if any) has committed."""
    transaction.on_commit(lambda: process_observation.delay(evidence_id))


@worker_ready.connect
def _sweep_on_start(**_: object) -> None:
    sweep_unsettled.delay()
