"""The drain with a model: the observations behind the head are extracted and planned ahead,
on threads, while the head commits (SPEC §5.5; docs/decisions.md, "Planning ahead").

A model answers in about a second and serves many requests at once; committing takes a few
milliseconds. So the drain of a namespace keeps ``PMEM_MODEL_CONCURRENCY`` calls' worth of its
next observations in preparation — extraction (under the observation's extraction claim, as a
task takes it: one a task is extracting is waited for, never doubled), soft key identity and
annotation — on this process's threads, looking as far ahead in its line as it must to keep
them busy while the head waits (up to ``_REACH`` times that many observations), and commits
them strictly in ``seq`` order,
each in its own short transaction. A plan is made on the state its thread saw (and, when an
earlier observation not committed yet names one of its keys, on what that one's plan makes
of the key); at its turn its basis (memory.services.basis) is checked, and when an earlier
commit changed any of it the observation is planned again, there and then: the result is
the one planning each observation after the previous one committed would give.

The extraction threads are the process's, shared by every line it drains, and take the most
urgent work first (memory.services.ingest.threads): an observation a later one waits for,
once the whole line is in view, then the oldest. A task's drain also drains namespaces no
drain holds (memory.services.ingest.adopt), and threads it leaves idle extract the oldest
observations of other namespaces that nobody is extracting, under their claims
(memory.services.ingest.elsewhere); their drains find the extraction stored and make no call
for it.

Inside a transaction the caller already holds (a test's), or with a concurrency of 1, the
observations are prepared one at a time on the caller's connection: threads could not see
what that transaction holds.
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import replace
from functools import partial
from typing import Any, TypeVar

from billiard.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection

from memory import metrics
from memory.domain import UNSETTLED_STATES, normalize_key
from memory.llm.hostslots import URGENCY
from memory.models import Evidence

from ..basis import basis_holds
from ..frontier import frontier_flush_if_due
from ..planning import Ahead, ModelUnavailable, PlanAtTurn
from ..shown import (
    awaited_in,
    by_urgency,
    from_kept,
    keep,
    related_in_line,
    shown_in_line,
)
from .adopt import Adoption, adopt
from .commit import commit_prepared
from .elsewhere import extract_elsewhere, extracted_elsewhere
from .extract import extract_waiting
from .line import next_unsettled, observation_fail, retry_leased
from .plan import Prepared, prepare
from .threads import depth, pool

log = logging.getLogger("pmem.observations")

#: Plans made again for one observation before the freshest is applied as it is: only a
#: writer outside the drain (none of ours) could keep changing what it read.
_REPLANS = 3
#: How often the drain's thread wakes while it waits on the pool; more often while its line
#: has room for observations that arrive meanwhile (their tasks leave them to this drain).
_WAKE_S = 0.2
_ARRIVALS_S = 0.04
#: How far the window reaches, in multiples of the calls a line may have in flight.
_REACH = 4

T = TypeVar("T")


def _threaded() -> bool:
    return int(settings.PMEM_MODEL_CONCURRENCY) > 1 and not connection.in_atomic_block


class PreparationTimedOut(Exception):
    """The head (``evidence_id``) was still being prepared when the caller's patience ran
    out (a task's soft time limit is near): the caller fails it with the reason."""

    def __init__(self, evidence_id: int) -> None:
        super().__init__(f"evidence {evidence_id} is still being prepared")
        self.evidence_id = evidence_id


def drain_ahead(namespace_id: int, *, room: int | None, deadline: float | None,
                give_up_at: float | None = None, adoption: Adoption | None = None) -> int:
    """Commit the namespace's next observations in seq order, preparing those behind the
    head meanwhile. The caller holds the drain lock. Stops when the line is empty or its
    head is not to be taken now, after ``room`` commits, or past ``deadline`` (monotonic,
    checked between commits: a head being prepared is waited for, and the task's soft time
    limit ends that wait). Raises :class:`ModelUnavailable` naming the head when the model
    cannot be reached for it, and :class:`PreparationTimedOut` when the head is still being
    prepared at ``give_up_at`` (monotonic). With ``adoption``, threads it leaves idle may
    drain namespaces nobody drains (memory.services.ingest.adopt)."""
    line = _Line(namespace_id, threaded=_threaded(), give_up_at=give_up_at, adoption=adoption)
    committed = 0
    try:
        while room is None or committed < room:
            head = line.advance()
            if head is None:
                break
            prepared = line.prepared(head)
            if prepared is None:
                continue  # it settled meanwhile (an unusable answer failed it)
            committed += _commit_checked(prepared)
            line.committed(head.pk)
            frontier_flush_if_due(namespace_id=namespace_id)
            if deadline is not None and time.monotonic() >= deadline:
                break
    finally:
        line.close()
    return committed


class _Line:
    """The observations in preparation: each is extracted on a thread as soon as it is in the
    window and a thread is free (those a later one waits for first, then earliest first; one
    an earlier observation in the window may name a key of waits for that one's extraction),
    and planned on a thread once every earlier one in the window is extracted — at once when
    none of those names one of its keys, else on the state their plans leave (a
    plan on the state before such a one commits would be stale for certain)."""

    def __init__(self, namespace_id: int, *, threaded: bool,
                 give_up_at: float | None = None, adoption: Adoption | None = None) -> None:
        self.namespace_id = namespace_id
        self.adoption = adoption
        self.give_up_at = give_up_at
        self.threaded = threaded
        self.width = max(1, int(settings.PMEM_MODEL_CONCURRENCY)) if threaded else 1
        self.order: list[int] = []  # the window, in seq order
        self.extracting: dict[int, Future[Evidence | None]] = {}
        self.extracted: dict[int, Evidence | None] = {}
        self.planning: dict[int, Future[Prepared | None]] = {}
        self.deferred: set[int] = set()  # extracted after earlier ones' plans
        self.elsewhere: dict[int, Future[None]] = {}  # other namespaces' extractions
        self.looked_elsewhere = 0.0  # monotonic: when it last looked for them

    def advance(self) -> Evidence | None:
        """The head of the line, after the window is topped up; None: stop here."""
        line = self._top_up()
        return line[0] if line and not retry_leased(line[0]) else None

    def _top_up(self) -> list[Evidence]:
        """The next observations in seq order (the window), each one's extraction started
        unless done or due to a task's retry. Also run while the head is awaited: what
        arrives meanwhile is extracted meanwhile (its task leaves it to this drain)."""
        # The window reaches past the calls it may have in flight: an observation held
        # back (its extraction waits for an earlier one's) or one extracted but not
        # committed yet (the line commits in seq order, behind a head held back) leaves its
        # thread to one further on, so the server's slots stay full while the head waits.
        # The line still commits in seq order, each plan checked at its turn.
        line = next_unsettled(self.namespace_id, self.width * _REACH if self.threaded else 1)
        self.order = [e.pk for e in line]
        self.deferred.clear()
        room = depth(self.width) - self._busy()
        related = related_in_line(line) if self.threaded else [[] for _ in line]
        # While the line reaches past the window, earliest first keeps its head moving; once
        # the whole line is in view, what is left is what the stream's end waits for.
        awaited = awaited_in(related) if len(line) < self.width * _REACH else set()
        for index in by_urgency(line, awaited):
            evidence = line[index]
            if evidence.pk in self.extracting or evidence.pk in self.extracted:
                continue
            if evidence.extracted is not None:
                self.extracted[evidence.pk] = evidence
            elif room <= 0:
                continue  # started once a call in flight ends, most urgent first
            elif self.threaded and not retry_leased(evidence):
                # Extracted once the earlier ones that may name its keys are extracted, shown
                # the heads their plans leave, or (not planned yet) their facts as accepted
                # (memory.services.shown): waiting for a plan would wait for every
                # observation before that one, and the line commits in seq order behind it.
                ahead = shown_in_line(related[index], self.planning, self.extracted)
                if ahead is None:
                    self.deferred.add(evidence.pk)
                else:
                    self.extracting[evidence.pk] = self._submit(
                        (evidence.pk not in awaited, evidence.pk), _extracted, evidence.pk, ahead)
                    room -= 1
        if self.threaded:
            self._extract_elsewhere()
        return line

    def _extract_elsewhere(self) -> None:
        """Drain namespaces no drain holds (a task's drain adopts them whether or not its
        threads are idle: the pool takes every line's extractions by urgency, so an
        adopted line's oldest observation is not left behind this one's newer ones), and
        give the threads this namespace leaves idle to other namespaces' extractions; looked
        for at most once per ``_WAKE_S`` (a drain commits far more often)."""
        if time.monotonic() - self.looked_elsewhere < _WAKE_S:
            return
        self.looked_elsewhere = time.monotonic()
        if self.adoption is not None and adopt(self.adoption, drained=self.namespace_id,
                                               room=self.width):
            return  # the namespaces adopted extract their own observations
        busy = self._busy()
        if busy >= self.width:
            return
        self.elsewhere.update(extract_elsewhere(
            self.namespace_id, self.width - busy,
            lambda pk: self._submit((True, pk), extracted_elsewhere, pk)))

    def prepared(self, head: Evidence) -> Prepared | None:
        """The head, prepared: wait for whatever is in flight, planning behind it meanwhile."""
        try:
            while True:
                self._collect()
                self._plan_what_may_be()
                extracting = self.extracting.get(head.pk)
                if extracting is not None and extracting.done():
                    extracting.result()  # it failed: raise what it raised
                planning = self.planning.get(head.pk)
                if planning is not None and planning.done():
                    if not isinstance(planning.exception(), PlanAtTurn):
                        return planning.result()
                    del self.planning[head.pk]  # planned here, now, on what they left
                    planning = None
                if planning is None and extracting is None:
                    if head.pk in self.extracted and self.extracted[head.pk] is None:
                        return None
                    return _ready(head.pk)  # nothing in flight for it: here, now
                # The task's time limit is kept here, not left to its signal: one that
                # reaches a pool thread is not seen by this one in time.
                if self.give_up_at is not None and time.monotonic() >= self.give_up_at:
                    raise PreparationTimedOut(head.pk)
                wait([f for f in self._futures() if not f.done()], return_when=FIRST_COMPLETED,
                     timeout=_ARRIVALS_S if self._room_for_arrivals() else _WAKE_S)
                if self.threaded:
                    # What the extractions just finished let be planned takes the threads
                    # before observations further on are started: the head waits on it.
                    self._collect()
                    self._plan_what_may_be()
                    self._top_up()
        except ModelUnavailable as exc:
            exc.evidence_id = exc.evidence_id or head.pk
            raise
        except (OperationalError, InterfaceError, SoftTimeLimitExceeded, PreparationTimedOut):
            raise  # an outage, or the task's time is up: the task deals with it
        except Exception as exc:  # a bug must not hold the namespace back forever
            log.exception("preparing evidence %s failed", head.pk)
            observation_fail(evidence_id=head.pk, reason="commit",
                             error=f"commit failed: {type(exc).__name__}: {exc}")
            return None
        finally:
            self.planning.pop(head.pk, None)

    def committed(self, evidence_id: int) -> None:
        self.extracted.pop(evidence_id, None)
        self.extracting.pop(evidence_id, None)

    def close(self) -> None:
        # Not started yet: cancelled. A running one finishes and is forgotten.
        for future in [*self._futures(), *self.elsewhere.values()]:
            future.cancel()
        for pk, planned in self.planning.items():
            planned.add_done_callback(partial(keep, pk))

    def _futures(self) -> list[Future[Any]]:
        return [*self.extracting.values(), *self.planning.values()]

    def _submit(self, urgency: tuple[bool, int], job: Callable[..., T],
                *args: object) -> Future[T]:
        """Run ``job`` (and its model calls) before less urgent ones: memory.services.ingest.threads."""
        rank, context = (int(urgency[0]), urgency[1]), contextvars.copy_context()
        context.run(URGENCY.set, rank)
        return pool("plan" if job is _planned else "extract").submit(rank, context.run, job, *args)

    def _collect(self) -> None:
        """Move finished extractions along. One that failed for the model stays failed
        (a retry is the task's); it is raised when it reaches the head."""
        for pk, future in list(self.extracting.items()):
            if future.done() and future.exception() is None:
                self.extracted[pk] = future.result()
                del self.extracting[pk]

    def _plan_what_may_be(self) -> None:
        """Plan each observation whose earlier ones in the window are extracted: at once
        when none of them names one of its keys, else once all of those are planned, on
        what their plans leave (the commit checks both against what they did)."""
        if not self.threaded:
            return
        naming: dict[str, list[int]] = {}  # key -> the earlier observations naming it
        for pk in self.order:
            if pk in self.extracting or pk in self.deferred or pk not in self.extracted:
                return  # its keys are not known yet: nothing behind it is planned yet
            evidence = self.extracted.get(pk)
            keys = _keys(evidence)
            if pk not in self.planning and evidence is not None:
                earlier = sorted({e for key in keys for e in naming.get(key, ())})
                ahead = _made_plans(self.planning, earlier) if not earlier or self._idle() else None
                if ahead is not None:
                    self.planning[pk] = from_kept(pk) or self._submit((False, pk), _planned,
                                                                      pk, ahead)
            for key in keys:
                naming.setdefault(key, []).append(pk)

    def _busy(self) -> int:
        """The threads this line holds now: its extractions, plans and other namespaces'
        extractions not done yet."""
        self.elsewhere = {pk: f for pk, f in self.elsewhere.items() if not f.done()}
        return sum(not f.done() for f in self._futures()) + len(self.elsewhere)

    def _room_for_arrivals(self) -> bool:
        """Would an observation arriving now be started at once (the window is not full and
        fewer extractions than the line may start are under way)?"""
        return (self.threaded and len(self.order) < self.width * _REACH
                and self._busy() < depth(self.width))

    def _idle(self) -> bool:
        """Has the pool a thread this line leaves idle? A plan on earlier plans (a call, as a
        rule) waits for one rather than hold up an extraction: else it is made at its turn."""
        return self._busy() < self.width


def _made_plans(planning: dict[int, Future[Prepared | None]],
                earlier: list[int]) -> list[Ahead] | None:
    """The plans of the ``earlier`` observations, once each is made; None while one is
    still being made (or failed: its turn decides)."""
    ahead: list[Ahead] = []
    for pk in earlier:
        future = planning.get(pk)
        if future is None or not future.done() or future.exception() is not None:
            return None
        prepared = future.result()
        if prepared is not None and prepared.plan is not None:
            ahead.append((prepared.evidence, prepared.plan.items))
    return ahead


def _keys(evidence: Evidence | None) -> set[str]:
    if evidence is None:
        return set()
    facts = (evidence.extracted or {}).get("facts") or []
    return {normalize_key(str(f.get("key") or "")) for f in facts} - {""}


def _extracted(evidence_id: int, ahead: Sequence[Ahead] = ()) -> Evidence | None:
    """On a thread: extract it (if nobody has), shown the heads the earlier plans ``ahead``
    leave, and return it; None once it has settled."""
    try:
        evidence = Evidence.objects.defer("embedding").get(pk=evidence_id)
        if evidence.state in UNSETTLED_STATES and evidence.extracted is None:
            extract_waiting(evidence_id, ahead)
            evidence = Evidence.objects.defer("embedding").get(pk=evidence_id)
        return evidence if evidence.state in UNSETTLED_STATES else None
    finally:
        connection.close()


def _planned(evidence_id: int, ahead: Sequence[Ahead] = ()) -> Prepared | None:
    """On a thread: plan it on the state now and what the plans ``ahead`` leave of it;
    None once it has settled; :class:`PlanAtTurn` when they cannot be planned on."""
    try:
        return _ready(evidence_id, ahead)
    finally:
        connection.close()


def _ready(evidence_id: int, ahead: Sequence[Ahead] = ()) -> Prepared | None:
    """Extract (if nobody has) and plan one observation; None when it settled meanwhile.
    Of the plans ``ahead``, those whose observations are committed by now are left out:
    the state holds what they did."""
    evidence = Evidence.objects.defer("embedding").select_related("namespace").get(
        pk=evidence_id)
    if evidence.state in UNSETTLED_STATES and evidence.extracted is None:
        extract_waiting(evidence_id)
        evidence = Evidence.objects.defer("embedding").select_related("namespace").get(
            pk=evidence_id)
    if evidence.state not in UNSETTLED_STATES:
        return None
    if ahead:
        pending = set(Evidence.objects.filter(
            pk__in=[e.pk for e, _ in ahead], state__in=UNSETTLED_STATES).values_list(
                "pk", flat=True))
        ahead = [(e, items) for e, items in ahead if e.pk in pending]
    return prepare(evidence, local=False, ahead=ahead)


def _commit_checked(prepared: Prepared) -> int:
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
        commit_prepared([prepared])
        return 1
    except ModelUnavailable as exc:
        exc.evidence_id = exc.evidence_id or evidence.pk
        raise
    except (OperationalError, InterfaceError, SoftTimeLimitExceeded):
        raise
    except Exception as exc:
        log.exception("commit of evidence %s failed", evidence.pk)
        observation_fail(evidence_id=evidence.pk, reason="commit",
                         error=f"commit failed: {type(exc).__name__}: {exc}")
        return 0


def _again(prepared: Prepared) -> Prepared:
    """The observation planned anew on the state now; both plans' costs are kept."""
    fresh = prepare(prepared.evidence, local=False)
    was, now = prepared.settled, fresh.settled
    return replace(fresh, settled=replace(
        now, chat_calls=was.chat_calls + now.chat_calls,
        embed_calls=was.embed_calls + now.embed_calls,
        prompt_tokens=was.prompt_tokens + now.prompt_tokens,
        completion_tokens=was.completion_tokens + now.completion_tokens))
