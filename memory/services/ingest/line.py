"""The line of a namespace's unsettled observations, in seq order, and who holds it: the
drain lock (a session-level advisory lock, never held inside a transaction), the head of the
line, and failing or retrying one observation so that the line moves on."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from memory import metrics
from memory.domain import UNSETTLED_STATES, EvidenceState
from memory.llm.extraction import runs_locally
from memory.models import Evidence

from ..settle import notify_settled

UNSETTLED = UNSETTLED_STATES
LOCK_CLASS = 0x504D  # "PM": the advisory-lock namespace of commit drains


def in_transaction() -> bool:
    """True inside a transaction the application opened (a test case's wrapping transaction,
    which Django marks, does not count)."""
    return any(not getattr(block, "_from_testcase", False) for block in connection.atomic_blocks)


def try_lock(namespace_id: int) -> bool:
    with connection.cursor() as cur:
        cur.execute("SELECT pg_try_advisory_lock(%s, %s)", [LOCK_CLASS, namespace_id])
        return bool(cur.fetchone()[0])


def unlock(namespace_id: int) -> None:
    with connection.cursor() as cur:
        cur.execute("SELECT pg_advisory_unlock(%s, %s)", [LOCK_CLASS, namespace_id])


def next_unsettled(namespace_id: int, limit: int = 1) -> list[Evidence]:
    # The vector is never needed to commit: don't ship and parse 384 floats per observation.
    return list(Evidence.objects.defer("embedding").filter(namespace_id=namespace_id,
                                                            state__in=UNSETTLED)
                .order_by("seq")[:limit])


def ready_to_commit(evidence: Evidence, local: bool) -> bool:
    """Can the drain commit it now? Extracted, or extractable inside the commit (local)."""
    return evidence.extracted is not None or local


def more_to_do(namespace_id: int) -> bool:
    """After releasing the lock: is there a head this drainer should come back for? Without
    a model: one that is ready, or held by no live task. With one, any head but one a task
    is due back for after a retry: tasks leave their observations to the drain that holds
    the namespace, which takes whatever arrived while it held it."""
    if runs_locally():  # every head is ready: extracted inside the commit
        return any_unsettled(namespace_id)
    following = next_unsettled(namespace_id)
    return bool(following) and not retry_leased(following[0])


def any_unsettled(namespace_id: int) -> bool:
    """One indexed probe (the unsettled partial index), without building a model instance:
    the question every commit in one transaction asks after it."""
    with connection.cursor() as cur:
        cur.execute(ANY_UNSETTLED_SQL, [namespace_id, *[str(s) for s in UNSETTLED]])
        return bool(cur.fetchone()[0])


ANY_UNSETTLED_SQL = ("SELECT EXISTS (SELECT 1 FROM memory_evidence WHERE namespace_id = %s"
                     f" AND state IN ({', '.join(['%s'] * len(UNSETTLED))}))")


def retry_leased(evidence: Evidence) -> bool:
    """Is a task due back for it after a retry's countdown? (A lease longer than a queued
    message's.) A drain leaves such an observation to that task rather than ask the model
    that just failed it again."""
    return (evidence.extracted is None and evidence.lease_until is not None
            and evidence.lease_until > timezone.now() + timedelta(
                seconds=max(1.0, float(settings.PMEM_SWEEP_EVERY))))


def namespace_draining(namespace_id: int) -> bool:
    """Does a drainer (a live session) hold the namespace now?"""
    if not try_lock(namespace_id):
        return True
    unlock(namespace_id)
    return False


def observation_fail(*, evidence_id: int, error: str, reason: str = "other") -> bool:
    """Mark an observation failed so it no longer holds back its namespace (``reason``: one
    word for ``pmem_observations_failed_total``). False when it had settled already."""
    failed = bool(Evidence.objects.filter(pk=evidence_id, state__in=UNSETTLED).update(
        state=EvidenceState.FAILED, error=error[:2000]))
    if failed:
        notify_settled([evidence_id])
        metrics.OBSERVATIONS_FAILED.labels(reason=reason).inc()
    return failed


def observation_retry(*, evidence: Evidence) -> bool:
    """Put a failed observation back in line. It keeps its seq and commits at the next drain
    (after observations that committed while it was failed). Returns False if not failed."""
    return bool(Evidence.objects.filter(pk=evidence.pk, state=EvidenceState.FAILED).update(
        state=EvidenceState.PENDING, error="", extracted=None))
