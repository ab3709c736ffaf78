"""The drain: one drainer per namespace commits its observations strictly in seq order.

How the observations are prepared and committed is the strategy the caller passes in: in
order, in groups of one transaction each (without a model: :func:`drain_in_order`), or
planned ahead on threads while the head commits (with one: :mod:`.ahead`). This module
holds what every strategy shares — the lock, the loop that comes back for what arrived
while the lock was held — and imports none of them."""

from __future__ import annotations

import logging
import time
from typing import Protocol

from django.conf import settings
from django.db import InterfaceError, OperationalError

from memory.models import Evidence

from ..frontier import frontier_flush_if_due
from ..planning import ModelUnavailable
from .adopt import Adoption
from .commit import commit_prepared, observation_commit
from .extract import FactsRefused
from .line import in_transaction, more_to_do, next_unsettled, observation_fail, try_lock, unlock
from .plan import prepare

log = logging.getLogger("pmem.observations")


class DrainStrategy(Protocol):
    """Commit the namespace's next observations, the drain lock held: how many it committed."""

    def __call__(self, namespace_id: int, *, room: int | None, deadline: float | None,
                 give_up_at: float | None, adoption: Adoption | None) -> int: ...


def drain(*, namespace_id: int, strategy: DrainStrategy, limit: int | None = None,
          deadline: float | None = None, give_up_at: float | None = None,
          adoption: Adoption | None = None) -> int:
    """Commit every observation of the namespace that is next in seq order, each turn of
    the lock by ``strategy``.

    Only one drainer runs per namespace (``pg_try_advisory_lock``); a caller that does not
    get the lock returns at once, because the holder re-checks after releasing it (so an
    observation extracted meanwhile is never stranded). Returns how many it committed. It
    stops after ``limit`` commits, or once ``deadline`` (``time.monotonic()``) has passed;
    with a model, a head still being prepared at ``give_up_at`` raises
    ``PreparationTimedOut`` (a task's soft time limit, kept without its signal).

    With a model, the next ``PMEM_MODEL_CONCURRENCY`` observations are extracted and planned
    ahead on threads while the head commits, each plan checked against what it read before
    it is applied (:mod:`.ahead`). An observation a task is extracting is waited
    for; one whose task is due back after a retry stops the drain (that task drains after
    it). When the model cannot be reached for the head, the drain stops and raises
    :class:`ModelUnavailable` naming it; nothing is failed here — the task retries. With
    ``adoption`` (a task's drain), threads it leaves idle drain namespaces nobody drains
    (:mod:`.adopt`).

    Without a model (rule extractor, structured facts, the built-in embedder) nothing has to
    leave the database between two observations, so the drain commits up to
    ``PMEM_COMMIT_GROUP`` consecutive observations in ONE transaction — group commit: one
    WAL flush and one transaction's bookkeeping for all of them, the same seq order, each
    observation still planned against the state the previous one left, so a group commits
    what one-at-a-time commits would (:func:`drain_in_order`)."""
    assert not in_transaction(), "namespace_drain makes model calls: never inside a transaction"
    committed = 0
    while True:
        if not try_lock(namespace_id):
            return committed
        try:
            room = None if limit is None else limit - committed
            committed += strategy(namespace_id, room=room, deadline=deadline,
                                  give_up_at=give_up_at, adoption=adoption)
        finally:
            unlock(namespace_id)
        if (limit and committed >= limit) or (deadline is not None and time.monotonic()
                                                >= deadline) or not more_to_do(namespace_id):
            return committed


def drain_in_order(namespace_id: int, *, room: int | None, deadline: float | None = None,
                   give_up_at: float | None = None, adoption: Adoption | None = None) -> int:
    """The drain without a model: groups of consecutive observations, each in one commit.
    Every head is ready (it is extracted inside its commit), so nothing is waited for:
    ``deadline``, ``give_up_at`` and ``adoption`` are the planned-ahead drain's."""
    committed = 0
    while room is None or committed < room:
        left = None if room is None else room - committed
        group = _next_group(namespace_id, True, left)
        if not group:
            break
        committed += _commit_group(group, True)
        frontier_flush_if_due(namespace_id=namespace_id)
        if len(group) < _group_size(True, left):
            break  # the line was shorter than a group: whatever came since, below
    return committed


def _next_group(namespace_id: int, local: bool, room: int | None) -> list[Evidence]:
    """The next observations in seq order, up to ``PMEM_COMMIT_GROUP`` (no model: each is
    extracted inside the commit)."""
    return next_unsettled(namespace_id, _group_size(local, room))


def _group_size(local: bool, room: int | None) -> int:
    size = max(1, int(settings.PMEM_COMMIT_GROUP)) if local else 1
    return size if room is None else min(size, room)


def _commit_group(group: list[Evidence], local: bool) -> int:
    """Commit ``group`` (consecutive seqs); one failing observation fails alone. An outage
    of the model stops the drain (:class:`ModelUnavailable`, naming the observation)."""
    if local and len(group) > 1:
        try:
            commit_prepared([prepare(evidence, local=True) for evidence in group])
            return len(group)
        except Exception:  # find the culprit: commit them one at a time, below
            log.warning("group commit of %d observations failed; committing them one by one",
                        len(group), exc_info=True)
    for evidence in group:
        try:
            observation_commit(evidence=evidence)
        except ModelUnavailable as exc:  # an outage: the observation waits, the task retries
            exc.evidence_id = exc.evidence_id or evidence.pk
            raise
        except (OperationalError, InterfaceError):
            raise  # the database is unreachable: nothing to blame the observation for
        except FactsRefused as exc:
            observation_fail(evidence_id=evidence.pk, reason="extraction",
                             error=f"extraction failed: {exc}")
        except Exception as exc:  # a bug must not hold the namespace back forever
            log.exception("commit of evidence %s failed", evidence.pk)
            observation_fail(evidence_id=evidence.pk, reason="commit",
                             error=f"commit failed: {type(exc).__name__}: {exc}")
    return len(group)
