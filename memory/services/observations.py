"""Observations: store first, extract, then commit in ``seq`` order per namespace (SPEC §5).

Life of an observation::

    observation_record   one transaction: lock the namespace row, take the next seq, insert
                         the evidence (state pending). Nothing else happens before it commits.
    observation_extract  no transaction held: structured facts as given, else the rule
                         extractor or the model. The result is stored once (compare-and-swap),
                         so a redelivered task reuses it and never calls the model twice.
    namespace_drain      one drainer per namespace (a session-level advisory lock, never held
                         inside a transaction): take the lowest unsettled seqs; prepare each
                         (with a model: resolve keys and annotate, outside any transaction),
                         then commit them in ONE transaction — one batch, one overlay, one
                         statement per table — and mark them committed. A head of the line
                         that nobody is extracting (its message lost, its task waiting to
                         retry) is extracted by the drain itself: the drain never waits on a
                         task that may not exist.

A single observation is a group of one: the same preparation, the same commit. Extraction may
finish in any order; commitment never reorders. A crash anywhere leaves the evidence pending
or processing, and the next delivery, drain or sweep (``memory.services.sweep``) finishes it
exactly once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import F
from django.utils import timezone

from memory import metrics
from memory.domain import UNSETTLED_STATES, EvidenceState, Plan, render
from memory.domain.admission import Refused, check_facts
from memory.llm.conversation import extract_conversation
from memory.llm.embedding import EmbeddingError
from memory.llm.errors import ModelError, is_transport
from memory.llm.extraction import extract_text, runs_locally
from memory.llm.vectors import Vectors, commit_vectors, observation_vectors
from memory.models import Cell, Evidence, KeyAlias, Namespace

from .admission import limits
from .batch import Applied, Batch
from .binding import pipelined
from .embeddings import messages_after_commit, refresh_after_commit
from .frontier import STALE_COUNT_SQL, frontier_flush_if_due
from .planning import Ahead, ModelUnavailable, plan_facts, plan_with_model
from .shown import heads_shown
from .writer import Settled, mark_committed, notify_settled

if TYPE_CHECKING:
    from .adopt import Adoption  # it builds on this module

log = logging.getLogger("pmem.observations")

UNSETTLED = UNSETTLED_STATES
_LOCK_CLASS = 0x504D  # "PM": the advisory-lock namespace of commit drains


class ExtractionFailed(ModelUnavailable):
    """The model (or the embedder) could not be reached for an observation's extraction,
    after the client's retries: the task retries it later."""


@dataclass(frozen=True)
class Recorded:
    evidence: Evidence
    created: bool  # False when an idempotency key replayed an earlier observation


class IdempotencyConflict(Exception):
    """An idempotency key already used in the namespace for a different request (HTTP 409):
    nothing is recorded, and ``first`` — the observation the key was first used for — stays
    as it was."""

    def __init__(self, first: Evidence) -> None:
        super().__init__(f"idempotency_key was already used in this namespace for another "
                         f"request (observation {first.pk}); send a new key with a new body")
        self.first = first


def observation_record(
    *,
    namespace: Namespace,
    text: str = "",
    facts: list[dict[str, Any]] | None = None,
    source: str = "",
    observed_at: datetime | None = None,
    idempotency_key: str | None = None,
    actor: str = "",
    messages: list[dict[str, Any]] | None = None,
    extract: bool = False,
) -> Recorded:
    """Store an observation as evidence with its seq, in one transaction.

    Holds the namespace row lock until commit, which makes seq strictly increasing in commit
    order and makes the idempotency check race-free. A reused ``idempotency_key`` (Stripe's
    semantics) replays the first observation unchanged (``created=False``) when the request
    is the same — text, facts, source and valid time — and raises
    :class:`IdempotencyConflict` when it is not. Only the key's SHA-256 is stored (SPEC §6: a
    key may hold a value that is erased later), and the request's (:func:`request_digest`).
    ``messages`` (a chat session) are stored as given; ``text`` is then their transcript
    with any text of the client's before it, rendered by the caller
    (:func:`memory.domain.conversation.observation_text`)."""
    key_digest = idempotency_digest(idempotency_key) if idempotency_key else None
    asked = (request_digest(text=text, facts=facts, source=source, observed_at=observed_at,
                            messages=messages, extract=extract) if key_digest else None)
    with transaction.atomic():
        seq = _take_seqs(namespace, 1)
        if key_digest:
            first = (Evidence.objects.filter(namespace=namespace, idempotency_key=key_digest)
                     .defer("extracted", "embedding").first())
            if first is not None:
                transaction.set_rollback(True)  # give the seq back: nothing was recorded
                if first.request_digest is not None and first.request_digest != asked:
                    raise IdempotencyConflict(first)
                return Recorded(first, created=False)
        evidence = Evidence.objects.create(
            namespace=namespace, seq=seq, text=text or "", facts=facts, source=source or "",
            observed_at=observed_at, idempotency_key=key_digest, request_digest=asked,
            actor=actor, messages=messages or None, extract_text=extract,
        )
    metrics.OBSERVATIONS_RECORDED.inc()
    return Recorded(evidence, created=True)


def idempotency_digest(key: str) -> str:
    """What is stored of a client's idempotency key: its hex SHA-256 (migration 0008)."""
    return hashlib.sha256(key.encode()).hexdigest()


def request_digest(*, text: str, facts: list[dict[str, Any]] | None, source: str,
                   observed_at: datetime | None,
                   messages: list[dict[str, Any]] | None = None,
                   extract: bool = False) -> str:
    """The hex SHA-256 of what an observation asks for, as validated: the same request sent
    twice (a retry) digests the same, whatever order its JSON keys came in; the valid time
    as the instant it names, whatever offset wrote it. ``messages`` and ``extract`` count
    only when given, so a request without them digests as it did before they existed."""
    asked: dict[str, Any] = {
        "text": text or "", "facts": facts or None, "source": source or "",
        "observed_at": observed_at.timestamp() if observed_at is not None else None}
    if messages:
        asked["messages"] = messages
    if extract:
        asked["extract"] = True
    canonical = json.dumps(asked, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def observations_record(*, namespace: Namespace, observations: list[dict[str, Any]],
                        actor: str = "") -> list[Evidence]:
    """Store several observations with consecutive seqs in one transaction (one INSERT)."""
    allowed = {"text", "facts", "source", "observed_at", "messages"}
    for item in observations:
        unknown = set(item) - allowed
        if unknown:
            raise TypeError(f"unknown observation fields: {sorted(unknown)}")
    if not observations:
        return []
    with transaction.atomic():
        first = _take_seqs(namespace, len(observations))
        rows = Evidence.objects.bulk_create([
            Evidence(namespace=namespace, seq=first + i, text=item.get("text") or "",
                     facts=item.get("facts"), source=item.get("source") or "",
                     observed_at=item.get("observed_at"), actor=actor,
                     messages=item.get("messages") or None,
                     extract_text=bool(item.get("extract")))
            for i, item in enumerate(observations)])
    metrics.OBSERVATIONS_RECORDED.inc(len(rows))
    return rows


def _take_seqs(namespace: Namespace, n: int) -> int:
    """Reserve ``n`` consecutive seqs and return the first. Must run inside the recording
    transaction: the UPDATE holds the namespace row lock until commit, which makes seqs
    strictly increasing in commit order (and gives them back if the transaction rolls back)."""
    with connection.cursor() as cur:
        cur.execute("UPDATE memory_namespace SET next_seq = next_seq + %s WHERE id = %s"
                    " RETURNING next_seq - %s", [n, namespace.pk, n])
        row = cur.fetchone()
    if row is None:
        raise Namespace.DoesNotExist(f"no namespace with id {namespace.pk}")
    return int(row[0])


# --- extraction -----------------------------------------------------------------------------


def _fact_dict(key: str, value: str | None, *, op: str | None = None, version: int | None = None,
               hard_commit: bool = False, assertion: str = "asserted",
               reason: str = "", metadata: dict[str, Any] | None = None,
               annotate: bool = False, expires_at: str | None = None) -> dict[str, Any]:
    # origin "client": decided without the model unless the client asked for it (SPEC §5.4).
    fact: dict[str, Any] = {"key": key, "value": value, "op": op, "version": version,
                            "hard_commit": hard_commit, "assertion": assertion,
                            "origin": "client"}
    if annotate:
        fact["annotate"] = True
    if reason:
        fact["reason"] = reason
    if metadata:  # metadata: the client's, carried to the version the fact creates
        fact["metadata"] = metadata
    if expires_at:  # SPEC §13: kept with the version the fact creates
        fact["expires_at"] = expires_at
    return fact


def fact_expiry(fact: dict[str, Any], received_at: datetime | None) -> str | None:
    """When the version a sent fact creates expires (ISO, UTC): its ``expires_at``, or its
    ``ttl`` counted from when the observation was received (from now while it is being
    received: one recorded and committed at once is extracted before its row exists); None:
    never."""
    if fact.get("expires_at"):
        return str(fact["expires_at"])
    if fact.get("ttl"):
        start = received_at or timezone.now()
        return (start + timedelta(seconds=int(fact["ttl"]))).isoformat()
    return None


def extract_facts(evidence: Evidence) -> dict[str, Any]:
    """Keyed facts of an observation: the client's structured facts first, then what the
    text yields (the model when one is configured, else the rule extractor). No DB access."""
    return _extract(evidence)[0]


class FactsRefused(ModelError):
    """What an observation yielded is more than the API takes (CONTRACT "Input that is
    refused": 500 facts, however they arose): it fails whole, nothing of it committed."""

    reason = "refused"


def _extract(evidence: Evidence, ahead: Sequence[Ahead] = ()) -> tuple[dict[str, Any],
                                                                      ModelError | None]:
    """:func:`extract_facts`, and the model's failure when its extraction failed. ``ahead``:
    earlier observations' plans not committed yet, whose heads extraction is shown."""
    failure: ModelError | None = None
    facts = [
        _fact_dict(f["key"], f.get("value"), op=f.get("op"), version=f.get("version"),
                   hard_commit=bool(f.get("hard_commit")), reason=f.get("reason") or "",
                   metadata=f.get("metadata"), annotate=bool(f.get("annotate")),
                   expires_at=fact_expiry(f, evidence.received_at))
        for f in (evidence.facts or [])
    ]
    result: dict[str, Any] = {"facts": facts, "extractor": "client" if facts else None,
                              "chat_calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
    # Text sent with facts is their evidence, not extracted again unless the client asked
    # (SPEC §5.2): a description beside a reading must not become keys of its own.
    if evidence.text.strip() and (not facts or evidence.extract_text):
        # The heads the model is shown are looked up only when it is asked at all.
        def heads() -> list[dict[str, Any]]:
            return heads_shown(evidence.namespace, evidence.text, ahead)

        extracted = (extract_conversation(evidence.text, evidence.messages, memory=heads)
                     if evidence.messages else extract_text(evidence.text, memory=heads))
        result["facts"] = facts + extracted.facts
        result["extractor"] = extracted.extractor if not facts else f"client+{extracted.extractor}"
        result["raw"] = extracted.raw
        result["chat_calls"] += extracted.chat_calls
        result["prompt_tokens"] += extracted.prompt_tokens
        result["completion_tokens"] += extracted.completion_tokens
        failure = extracted.failure
        if failure is not None:
            result["extraction_error"] = str(failure)
        if extracted.dropped:  # the model's facts refused before anything was written
            result["dropped"] = extracted.dropped
        if extracted.shown:  # what its proposed ops were made against
            result["shown"] = extracted.shown
        if extracted.chunks > 1:  # a session past the model's context: said, not hidden
            result["chunks"] = extracted.chunks
    if failure is None:
        try:
            check_facts(result["facts"], limits(), "facts found")
        except Refused as refused:
            failure = FactsRefused(str(refused))
            # Kept as the error says, not stored: no client could have sent them (and an
            # export must hold only what the importer, with the API's limits, takes back).
            result["extraction_error"] = str(failure)
            result["facts_refused"] = len(result["facts"])
            result["facts"] = []
    return result, failure


def evidence_text(evidence: Evidence) -> str:
    """What the raw reads show and embed for an observation: its text, else its facts."""
    return render.evidence_text(evidence.text, evidence.facts)


def observation_extract(*, evidence_id: int, ahead: Sequence[Ahead] = ()) -> bool:
    """Extract once and store the result; returns False when the evidence is already settled
    (or has just failed).

    Costs one extraction call (when text and a model are there) and ONE embedding batch: the
    evidence text with every key and ``key: value`` of its facts, cached in ``extracted`` for
    identity and the refresh after commit (:func:`memory.llm.vectors.observation_vectors`).
    Raises :class:`ExtractionFailed` when the model or the embedder is unreachable after its
    retries, so the task can retry. An answer that came back unusable (unparsable, wrong
    schema, empty) fails the observation at once, its raw answer kept in ``extracted``.
    Concurrent duplicate deliveries call the model once: the first claims the extraction
    (an advisory lock), the others return at once. ``ahead``: earlier observations' plans
    (or their facts read as accepted), not committed yet, whose heads extraction is shown
    (memory.services.shown)."""
    if runs_locally():
        return True  # no model, nothing remote: the drain extracts it inside its commit
    if not _try_claim_extraction(evidence_id):
        return True  # a duplicate delivery is extracting it right now, and drains after
    try:
        return _extract_claimed(evidence_id, ahead)
    finally:
        _release_extraction(evidence_id)


def _try_claim_extraction(evidence_id: int) -> bool:
    # The single-bigint advisory-lock space holds extraction claims (drains use the two-int
    # space). A session lock, not a row lock: it is held across the model call, which must
    # not sit inside a transaction, and PostgreSQL drops it if the worker dies.
    with connection.cursor() as cur:
        cur.execute("SELECT pg_try_advisory_lock(%s::bigint)", [evidence_id])
        return bool(cur.fetchone()[0])


def _release_extraction(evidence_id: int) -> None:
    with connection.cursor() as cur:
        cur.execute("SELECT pg_advisory_unlock(%s::bigint)", [evidence_id])


def _extract_claimed(evidence_id: int, ahead: Sequence[Ahead] = ()) -> bool:
    evidence = Evidence.objects.defer("embedding").get(pk=evidence_id)
    if evidence.state not in UNSETTLED:
        return False
    if evidence.extracted is not None:
        return True
    result, failure = _extract(evidence, ahead)  # model calls: outside any transaction
    costs = {"chat_calls": result["chat_calls"], "prompt_tokens": result["prompt_tokens"],
             "completion_tokens": result["completion_tokens"]}
    unsettled = Evidence.objects.filter(pk=evidence_id, extracted__isnull=True,
                                        state__in=UNSETTLED)
    if is_transport(failure):
        raise ExtractionFailed(f"extraction failed: {failure}", evidence_id=evidence_id)
    if failure is not None:
        if unsettled.update(extracted=result, state=EvidenceState.FAILED,
                            error=f"extraction failed: {failure}"[:2000], **costs):
            notify_settled([evidence_id])
            metrics.OBSERVATIONS_FAILED.labels(reason="extraction").inc()
        return False
    try:
        vectors = observation_vectors(text=evidence_text(evidence), facts=result["facts"])
    except EmbeddingError as exc:
        raise ExtractionFailed(f"extraction failed: embedding failed: {exc}",
                               evidence_id=evidence_id) from exc
    if vectors.cache:
        result["vectors"] = vectors.cache
    unsettled.update(extracted=result, state=EvidenceState.PROCESSING,
                     embedding=vectors.evidence, embed_calls=vectors.embed_calls, **costs)
    return True


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


# --- the drain: commitment in seq order --------------------------------------------------------


def in_transaction() -> bool:
    """True inside a transaction the application opened (a test case's wrapping transaction,
    which Django marks, does not count)."""
    return any(not getattr(block, "_from_testcase", False) for block in connection.atomic_blocks)


def _try_lock(namespace_id: int) -> bool:
    with connection.cursor() as cur:
        cur.execute("SELECT pg_try_advisory_lock(%s, %s)", [_LOCK_CLASS, namespace_id])
        return bool(cur.fetchone()[0])


def _unlock(namespace_id: int) -> None:
    with connection.cursor() as cur:
        cur.execute("SELECT pg_advisory_unlock(%s, %s)", [_LOCK_CLASS, namespace_id])


def _next_unsettled(namespace_id: int, limit: int = 1) -> list[Evidence]:
    # The vector is never needed to commit: don't ship and parse 384 floats per observation.
    return list(Evidence.objects.defer("embedding").filter(namespace_id=namespace_id,
                                                            state__in=UNSETTLED)
                .order_by("seq")[:limit])


def _ready(evidence: Evidence, local: bool) -> bool:
    """Can the drain commit it now? Extracted, or extractable inside the commit (local)."""
    return evidence.extracted is not None or local


def namespace_drain(*, namespace_id: int, limit: int | None = None,
                    deadline: float | None = None, give_up_at: float | None = None,
                    adoption: Adoption | None = None) -> int:
    """Commit every observation of the namespace that is next in seq order.

    Only one drainer runs per namespace (``pg_try_advisory_lock``); a caller that does not
    get the lock returns at once, because the holder re-checks after releasing it (so an
    observation extracted meanwhile is never stranded). Returns how many it committed. It
    stops after ``limit`` commits, or once ``deadline`` (``time.monotonic()``) has passed;
    with a model, a head still being prepared at ``give_up_at`` raises
    ``PreparationTimedOut`` (a task's soft time limit, kept without its signal).

    With a model, the next ``PMEM_MODEL_CONCURRENCY`` observations are extracted and planned
    ahead on threads while the head commits, each plan checked against what it read before
    it is applied (memory.services.ahead). An observation a task is extracting is waited
    for; one whose task is due back after a retry stops the drain (that task drains after
    it). When the model cannot be reached for the head, the drain stops and raises
    :class:`ModelUnavailable` naming it; nothing is failed here — the task retries. With
    ``adoption`` (a task's drain), threads it leaves idle drain namespaces nobody drains
    (:mod:`memory.services.adopt`).

    Without a model (rule extractor, structured facts, the built-in embedder) nothing has to
    leave the database between two observations, so the drain commits up to
    ``PMEM_COMMIT_GROUP`` consecutive observations in ONE transaction — group commit: one
    WAL flush and one transaction's bookkeeping for all of them, the same seq order, each
    observation still planned against the state the previous one left (decision 14)."""
    assert not in_transaction(), "namespace_drain makes model calls: never inside a transaction"
    committed = 0
    while True:
        if not _try_lock(namespace_id):
            return committed
        try:
            room = None if limit is None else limit - committed
            if runs_locally():
                committed += _drain_locally(namespace_id, room)
            else:
                from .ahead import drain_ahead  # it builds on this module

                committed += drain_ahead(namespace_id, room=room, deadline=deadline,
                                         give_up_at=give_up_at, adoption=adoption)
        finally:
            _unlock(namespace_id)
        if (limit and committed >= limit) or (deadline is not None and time.monotonic()
                                                >= deadline) or not _more_to_do(namespace_id):
            return committed


def _drain_locally(namespace_id: int, room: int | None) -> int:
    """The drain without a model: groups of consecutive observations, each in one commit."""
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


def _more_to_do(namespace_id: int) -> bool:
    """After releasing the lock: is there a head this drainer should come back for? Without
    a model: one that is ready, or held by no live task. With one, any head but one a task
    is due back for after a retry: tasks leave their observations to the drain that holds
    the namespace, which takes whatever arrived while it held it."""
    if runs_locally():  # every head is ready: extracted inside the commit
        return _any_unsettled(namespace_id)
    following = _next_unsettled(namespace_id)
    return bool(following) and not retry_leased(following[0])


def _any_unsettled(namespace_id: int) -> bool:
    """One indexed probe (the unsettled partial index), without building a model instance:
    the question every commit in one transaction asks after it."""
    with connection.cursor() as cur:
        cur.execute(_ANY_UNSETTLED_SQL, [namespace_id, *[str(s) for s in UNSETTLED]])
        return bool(cur.fetchone()[0])


_ANY_UNSETTLED_SQL = ("SELECT EXISTS (SELECT 1 FROM memory_evidence WHERE namespace_id = %s"
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
    if not _try_lock(namespace_id):
        return True
    _unlock(namespace_id)
    return False


def _next_group(namespace_id: int, local: bool, room: int | None) -> list[Evidence]:
    """The next observations in seq order, up to ``PMEM_COMMIT_GROUP`` (no model: each is
    extracted inside the commit)."""
    return _next_unsettled(namespace_id, _group_size(local, room))


def _group_size(local: bool, room: int | None) -> int:
    size = max(1, int(settings.PMEM_COMMIT_GROUP)) if local else 1
    return size if room is None else min(size, room)


def _commit_group(group: list[Evidence], local: bool) -> int:
    """Commit ``group`` (consecutive seqs); one failing observation fails alone. An outage
    of the model stops the drain (:class:`ModelUnavailable`, naming the observation)."""
    if local and len(group) > 1:
        try:
            _commit([_prepare(evidence, local=True) for evidence in group])
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


def observation_commit(*, evidence: Evidence) -> list[Applied]:
    """Prepare (with a model: annotate, outside a transaction) and apply all facts of one
    extracted observation in one transaction: a group of one. The caller must hold the
    namespace's drain lock."""
    return _commit([_prepare(evidence, local=runs_locally())]).get(evidence.pk, [])


# --- one commit for one observation or a group --------------------------------------------------


@dataclass
class _Prepared:
    """An observation ready to commit: everything computed outside the transaction."""

    evidence: Evidence
    facts: list[dict[str, Any]]  # planned inside the commit, on the overlay (no model)
    plan: Plan | None  # planned before it (with a model): applied as it is
    vectors: Vectors  # what the commit may install (text -> vector)
    settled: Settled
    cached: dict[str, str] = field(default_factory=dict)  # packed vectors, for the refresh


def _prepare(evidence: Evidence, *, local: bool, ahead: Sequence[Ahead] = ()) -> _Prepared:
    """Extraction (local: now, if the drain extracts it) and every vector the commit needs,
    computed before its transaction opens; with a model, the plan too (on what the earlier
    observations' plans in ``ahead`` leave, where it may)."""
    if local:
        stored = evidence.extracted is not None
        result, failure = (({k: v for k, v in (evidence.extracted or {}).items()
                             if k != "vectors"}, None) if stored else _extract(evidence))
        if isinstance(failure, FactsRefused):
            raise failure
        vector = None if stored else observation_vectors(text=evidence_text(evidence),
                                                         facts=[]).evidence
        facts = list(result.get("facts", []))
        return _Prepared(evidence, facts, None,
                         commit_vectors(((f.get("key"), f.get("value")) for f in facts), {}),
                         Settled(evidence.pk, None if stored else result, vector))
    extracted = dict(evidence.extracted or {})
    slim = "vectors" in extracted  # the cached vectors serve this commit: keep the row small
    cached = extracted.pop("vectors", None) or {}
    plan = plan_with_model(namespace=evidence.namespace, facts=list(extracted.get("facts", [])),
                           actor=evidence.actor, vectors=cached, evidence=evidence,
                           shown=extracted.get("shown") or (), ahead=ahead)
    return _Prepared(
        evidence, [], plan, commit_vectors(((i.key, i.value) for i, _ in plan.items), cached),
        Settled(evidence.pk, extracted if slim else None, chat_calls=plan.chat_calls,
                embed_calls=plan.embed_calls, prompt_tokens=plan.prompt_tokens,
                completion_tokens=plan.completion_tokens),
        cached)


def _commit(prepared: list[_Prepared]) -> dict[int, list[Applied]]:
    """Commit consecutive observations in ONE transaction: their evidence rows locked, the
    cells of every key they name locked once (one batch), each planned — unless it came
    planned — on the overlay of the previous ones' decisions, everything written with one
    statement per table. Run again when PostgreSQL aborts it as a deadlock victim."""
    first = prepared[0].evidence
    with metrics.timed(metrics.COMMIT_SECONDS):
        out, received = _retrying(f"{len(prepared)} observation(s) from seq {first.seq}",
                                  lambda: _commit_transaction(prepared))
    _count_committed(received)
    for p in prepared:
        if out.get(p.evidence.pk):
            _after_commit(p.evidence, out[p.evidence.pk], p.cached)
    if any(p.evidence.messages for p in prepared):  # sessions: their messages' vectors
        messages_after_commit(namespace_id=first.namespace_id)
    return out


def _count_committed(received: list[datetime]) -> None:
    """The metrics of a commit: how many it committed, each one's time from receipt."""
    now = timezone.now()
    metrics.OBSERVATIONS_COMMITTED.inc(len(received))
    for at in received:
        metrics.SETTLE_SECONDS.observe(max(0.0, (now - at).total_seconds()))


def _commit_transaction(prepared: list[_Prepared], *, recorded: bool = False,
                        ) -> tuple[dict[int, list[Applied]], list[datetime]]:
    """The transaction of :func:`_commit`: the operations by evidence id, and when each
    observation it committed was received. ``recorded``: the caller inserted these evidence
    rows, already committed (:func:`_insert_settled`), in its own open transaction, which
    this joins (no savepoint: a failure rolls the whole of it back); its insert locks them,
    so they are taken as they are."""
    out: dict[int, list[Applied]] = {}
    now = timezone.now()
    with transaction.atomic(savepoint=not recorded):
        # of=("self",): lock the evidence rows only, never their namespace's row (a flush's
        # foreign-key check takes KEY SHARE on it, and would wait for this whole group).
        locked = ({p.evidence.pk: p.evidence for p in prepared} if recorded else
                  {e.pk: e for e in Evidence.objects.select_for_update(of=("self",))
                   .defer("embedding").select_related("namespace")
                   .filter(pk__in=[p.evidence.pk for p in prepared])})
        live = [(locked[p.evidence.pk], p) for p in prepared
                if p.evidence.pk in locked and (recorded or locked[p.evidence.pk].state
                                                in UNSETTLED)]
        if not live:
            return out, []  # redelivered tasks committed them already
        namespace = live[0][0].namespace
        for _, p in live:
            _register_aliases(namespace, p.plan.aliases if p.plan else [])
        batch = _open_batch(namespace, [p for _, p in live])
        for row, p in live:
            if p.plan is not None:
                batch.apply(p.plan.items, evidence=row)
            else:  # each round of its facts applied before the next is planned
                plan_facts(facts=p.facts, actor=row.actor, overlay=batch.overlay,
                           apply=partial(batch.apply, evidence=row))
        with pipelined():  # nothing below reads a result but the ids the writer takes first
            for applied in batch.write():
                out.setdefault(applied.evidence_id or 0, []).append(applied)
            if recorded:  # inserted as committed (_insert_settled): only the notice
                notify_settled([row.pk for row, _ in live])
            else:
                mark_committed([p.settled for _, p in live], now)
    return out, [row.received_at for row, _ in live]


def _open_batch(namespace: Namespace, prepared: list[_Prepared]) -> Batch:
    """The batch of a commit: the cells of every key its observations name, a cell created
    for every key an operation could create (those left unused are deleted again)."""
    keys: list[str] = []
    creating: list[str] = []
    named: list[int | None] = []
    vectors: Vectors = {}
    for p in prepared:
        vectors.update(p.vectors)
        if p.plan is not None:
            keys += [item.key for item, _ in p.plan.items]
            creating += [item.key for item, _ in p.plan.items if item.creates]
            named += [item.version_id for item, _ in p.plan.items]
        else:
            keys += [str(f.get("key") or "") for f in p.facts]
            creating += [str(f.get("key") or "") for f in p.facts
                         if f.get("value") is not None and str(f["value"]).strip()]
    return Batch.open(namespace=namespace, keys=keys, creating=creating, vectors=vectors,
                      named=named)


#: SQLSTATEs after which the same transaction may simply be run again: deadlock detected,
#: serialization failure. Nothing of the rolled-back attempt was kept.
_TRANSIENT = frozenset({"40P01", "40001"})
T = TypeVar("T")


def _retrying(what: str, commit: Callable[[], T], attempts: int = 3) -> T:
    """Run ``commit`` (which opens its own transaction) again when PostgreSQL aborted it for
    a transient reason (a deadlock with a concurrent writer), instead of failing the
    observations. Only the transaction is re-run: extraction, annotation and embeddings
    were computed before it and are reused (no model is called twice)."""
    for attempt in range(1, attempts + 1):
        try:
            return commit()
        except OperationalError as exc:
            if getattr(exc.__cause__, "sqlstate", None) not in _TRANSIENT or attempt == attempts:
                raise
            log.warning("commit of %s aborted (%s); running it again", what, exc)
    raise AssertionError("unreachable")


def _after_commit(evidence: Evidence, applied: list[Applied], vectors: dict[str, str]) -> int:
    """Refresh the embeddings the commit could not write itself; the embedder calls made."""
    if all(a.embedded or a.cell is None or a.decision is None for a in applied):
        return 0  # the commit wrote every moved cell's embedding itself
    try:  # the commit stands whatever happens here; stale embeddings refresh later
        calls = refresh_after_commit(applied, vectors)
    except Exception:
        log.exception("refreshing embeddings after evidence %s failed", evidence.pk)
        calls = 0
    if calls:
        Evidence.objects.filter(pk=evidence.pk).update(embed_calls=F("embed_calls") + calls)
    return calls


def _register_aliases(namespace: Namespace, aliases: list[tuple[str, str]]) -> None:
    for alias, canonical in aliases:
        cell = Cell.objects.filter(namespace=namespace, key=canonical).first()
        if cell is not None:
            KeyAlias.objects.bulk_create([KeyAlias(namespace=namespace, cell=cell, alias=alias)],
                                         ignore_conflicts=True)


# --- in-process ingest (benchmarks, the demo loader, tests) --------------------------------------


def observation_ingest(
    *,
    namespace: Namespace,
    text: str | None = None,
    facts: list[dict[str, Any]] | None = None,
    source: str = "",
    observed_at: datetime | None = None,
    actor: str = "api:inline",
    messages: list[dict[str, Any]] | None = None,
    extract: bool = False,
) -> Evidence:
    """Record and commit one observation in-process, through the same code the worker runs
    (benchmarks, the demo loader, tests). Earlier unsettled observations commit first.

    Without a model, when this caller gets the namespace's drain and nothing is ahead of the
    observation, it is recorded and committed in ONE transaction (one WAL flush, not two):
    nothing is acknowledged before that commits, and if it fails the observation is
    recorded on its own and goes the usual way (so a bug still leaves it stored, failed)."""
    at_once = _ingest_at_once(namespace=namespace, text=text or "", facts=facts,
                              source=source, observed_at=observed_at, actor=actor,
                              messages=messages, extract=extract)
    if at_once is not None:
        return at_once
    recorded = observation_record(namespace=namespace, text=text or "", facts=facts,
                                  source=source, observed_at=observed_at, actor=actor,
                                  messages=messages, extract=extract)
    observation_extract(evidence_id=recorded.evidence.pk)
    namespace_drain(namespace_id=namespace.pk)
    return Evidence.objects.get(pk=recorded.evidence.pk)


def observation_commit_at_once(*, namespace: Namespace, text: str = "",
                               facts: list[dict[str, Any]] | None = None, source: str = "",
                               observed_at: datetime | None = None,
                               idempotency_key: str | None = None, actor: str = "",
                               hand_on: Callable[[int], None],
                               messages: list[dict[str, Any]] | None = None,
                               extract: bool = False) -> Evidence | None:
    """For a caller that waits for the commit anyway (the API's ``wait=1``): record and commit
    the observation in ONE transaction, as :func:`observation_ingest` does, when it can be —
    no model, the namespace's drain free, nothing unsettled ahead, ``idempotency_key`` not
    used before. None when it cannot be: nothing of it was kept, and the caller records it
    the usual way (which also replays a used key). Observations that arrived for the
    namespace meanwhile are handed to ``hand_on`` (a queued drain), not drained here."""
    return _ingest_at_once(namespace=namespace, text=text, facts=facts, source=source,
                           observed_at=observed_at, actor=actor,
                           idempotency_key=idempotency_key, hand_on=hand_on,
                           messages=messages, extract=extract)


def _ingest_at_once(*, namespace: Namespace, text: str, facts: list[dict[str, Any]] | None,
                    source: str, observed_at: datetime | None, actor: str,
                    idempotency_key: str | None = None,
                    hand_on: Callable[[int], None] | None = None,
                    messages: list[dict[str, Any]] | None = None,
                    extract: bool = False) -> Evidence | None:
    """:func:`observation_ingest` in one transaction, or None when it cannot be (a model is
    configured, another drainer holds the namespace, an earlier observation is unsettled,
    the idempotency key was used, or the transaction failed: nothing of it was kept)."""
    if not runs_locally() or in_transaction() or not _try_lock(namespace.pk):
        return None
    held = True
    try:
        key_digest = idempotency_digest(idempotency_key) if idempotency_key else None
        evidence = Evidence(
            namespace=namespace, text=text, facts=facts, source=source,
            observed_at=observed_at, actor=actor, idempotency_key=key_digest,
            messages=messages or None, extract_text=extract,
            request_digest=request_digest(text=text, facts=facts, source=source,
                                          observed_at=observed_at, messages=messages,
                                          extract=extract) if key_digest else None)
        try:
            prepared = _prepare(evidence, local=True)  # every vector, before the transaction
        except FactsRefused:
            return None  # recorded on its own, then failed by the drain, saying why

        def record_and_commit() -> tuple[dict[int, list[Applied]], list[datetime]]:
            with transaction.atomic():
                if not _insert_settled(evidence, prepared.settled):
                    raise _Behind  # earlier observations commit first; or a replay
                prepared.settled = replace(prepared.settled, evidence_id=evidence.pk)
                return _commit_transaction([prepared], recorded=True)

        try:
            out, received = _retrying("an observation recorded and committed at once",
                                      record_and_commit)
        except _Behind:
            return None  # earlier observations commit first, in seq order
        except Exception:
            log.warning("ingest in one transaction failed; recording it on its own",
                        exc_info=True)
            return None
        metrics.OBSERVATIONS_RECORDED.inc()
        _count_committed(received)
        if out.get(evidence.pk):
            evidence.embed_calls += _after_commit(evidence, out[evidence.pk], prepared.cached)
        stale, more = _release_and_look(namespace.pk)
        held = False
    finally:
        if held:
            _unlock(namespace.pk)
    frontier_flush_if_due(namespace_id=namespace.pk, stale=stale)
    if evidence.messages:  # a session: its messages' vectors
        messages_after_commit(namespace_id=namespace.pk)
    if more:  # one that tried the drain meanwhile left it to us
        if hand_on is None:
            namespace_drain(namespace_id=namespace.pk)
        else:
            hand_on(namespace.pk)
    return evidence  # as inserted: the row holds nothing else


def _release_and_look(namespace_id: int) -> tuple[int, bool]:
    """After a commit made at once, in ONE round trip: the namespace's stale cells (for the
    frontier flush), its drain lock released, and whether any observation of it is
    unsettled (one that tried the drain meanwhile left it to this caller). The statements
    go out pipelined and run in order, so the look's snapshot is taken after the unlock,
    as a look of its own would be."""
    with pipelined(), connection.cursor() as count, connection.cursor() as unlock, \
            connection.cursor() as look:
        count.execute(STALE_COUNT_SQL, [namespace_id])
        unlock.execute("SELECT pg_advisory_unlock(%s, %s)", [_LOCK_CLASS, namespace_id])
        look.execute(_ANY_UNSETTLED_SQL, [namespace_id, *[str(s) for s in UNSETTLED]])
        return int(count.fetchone()[0]), bool(look.fetchone()[0])


class _Behind(Exception):
    """An earlier observation of the namespace is unsettled (this one must wait its turn), or
    the idempotency key was used: the usual way answers it."""


def _insert_settled(evidence: Evidence, settled: Settled) -> bool:
    """Take the namespace's next seq and insert ``evidence`` as it will be once its commit
    (in this same transaction) is done: committed, with what extraction found and what it
    cost — one tuple, each index entry written once. Inserts nothing and returns False
    when an earlier observation of the namespace is unsettled, or ``evidence``'s
    idempotency key was used.

    The INSERT follows :func:`_take_seqs`: its snapshot is taken once the namespace row
    lock is held, so every observation recorded with a lower seq has committed and is seen
    by its look for unsettled ones (a look made before the seq was taken could miss one
    recorded in between). The look is served by the partial index of unsettled
    observations (``IN``, so its predicate is matched)."""
    # Received and committed at one instant: the row is both at once (auto_now_add would
    # stamp received_at after committed_at, hence both set here).
    evidence.received_at = evidence.committed_at = timezone.now()
    evidence.state, evidence.error = EvidenceState.COMMITTED, ""
    if settled.extracted is not None:
        evidence.extracted = settled.extracted
    if settled.vector is not None:
        evidence.embedding = settled.vector
    for cost in ("chat_calls", "embed_calls", "prompt_tokens", "completion_tokens"):
        setattr(evidence, cost, getattr(settled, cost))  # a new row: its only costs
    evidence.seq = _take_seqs(evidence.namespace, 1)
    fields = [f for f in Evidence._meta.concrete_fields if not f.primary_key]
    values = [connection.ops.adapt_json_value(evidence.extracted, DjangoJSONEncoder)
              if f.attname == "extracted" else
              f.get_db_prep_save(getattr(evidence, f.attname), connection) for f in fields]
    used = (" AND NOT EXISTS (SELECT 1 FROM memory_evidence WHERE namespace_id = %s"
            " AND idempotency_key = %s)") if evidence.idempotency_key else ""
    with connection.cursor() as cur:
        cur.execute(
            f"INSERT INTO memory_evidence ({', '.join(str(f.column) for f in fields)})"
            f" SELECT {', '.join(f'%s::{f.cast_db_type(connection)}' for f in fields)}"
            " WHERE NOT EXISTS (SELECT 1 FROM memory_evidence WHERE namespace_id = %s"
            f" AND state IN ({', '.join(['%s'] * len(UNSETTLED))})){used} RETURNING id",
            [*values, evidence.namespace_id, *[str(s) for s in UNSETTLED],
             *([evidence.namespace_id, evidence.idempotency_key] if used else [])])
        row = cur.fetchone()
    if row is None:
        return False
    evidence.pk, evidence._state.adding = row[0], False
    return True


def observations_ingest(*, namespace: Namespace, observations: list[dict[str, Any]],
                        actor: str = "api:inline") -> list[Evidence]:
    """Record many observations in ONE transaction (consecutive seqs, in list order), then
    commit them in-process — in groups when no model is involved (imports, benchmarks).
    Each item takes the keyword arguments of :func:`observation_record` (``text``,
    ``facts``, ``source``, ``observed_at``). Returns the evidence rows, as committed."""
    recorded = observations_record(namespace=namespace, observations=observations, actor=actor)
    namespace_drain(namespace_id=namespace.pk)  # with a model, it extracts them ahead itself
    by_id = Evidence.objects.defer("embedding").in_bulk([e.pk for e in recorded])
    return [by_id[e.pk] for e in recorded]


__all__ = [
    "ExtractionFailed", "Recorded", "evidence_text", "extract_facts", "namespace_drain",
    "namespace_draining",
    "observation_commit", "observation_extract", "observation_fail",
    "observation_ingest", "observation_record", "observation_retry", "observations_ingest",
    "observations_record",
]
