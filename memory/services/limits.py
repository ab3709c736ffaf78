"""Failing an observation whose processing ran past a time limit (docs/decisions.md, "Time
limits"). The task layer knows when a limit struck; these say which observation it was
working on and mark it failed, so that its namespace moves on."""

from __future__ import annotations

from memory import metrics
from memory.domain import EvidenceState
from memory.llm.extraction import runs_locally
from memory.models import Evidence

from .ingest.line import UNSETTLED, next_unsettled, observation_fail, ready_to_commit
from .settle import notify_settled


def observation_fail_if_unextracted(*, evidence_id: int, error: str) -> bool:
    """Fail the observation if its model extraction was still under way (unsettled, nothing
    extracted yet) and say so; False when it was past that point. Without a model nothing is
    extracted outside the drain: False."""
    if runs_locally():
        return False
    failed = bool(Evidence.objects.filter(pk=evidence_id, state__in=UNSETTLED,
                                          extracted__isnull=True)
                  .update(state=EvidenceState.FAILED, error=error[:2000]))
    if failed:
        notify_settled([evidence_id])
        metrics.OBSERVATIONS_FAILED.labels(reason="time_limit").inc()
    return failed


def namespace_head_fail(*, namespace_id: int, error: str) -> int | None:
    """Fail the observation a drain of the namespace was committing when a limit struck: the
    lowest unsettled seq, if it is ready to commit (the drain commits strictly in seq order,
    and only a ready one). Returns its id, or None when no commit can have been under way.

    A commit checks the state under a row lock, so a drain that raced ahead never commits an
    observation failed here; the price of the race is that the observation after it, when
    that drain had already committed the slow one, fails instead (and can be retried)."""
    head = next_unsettled(namespace_id)
    if not head or not ready_to_commit(head[0], runs_locally()):
        return None
    observation_fail(evidence_id=head[0].pk, error=error, reason="time_limit")
    return head[0].pk
