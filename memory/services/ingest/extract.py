"""Extraction: an observation's keyed facts — the client's as given, else the rule extractor's
or the model's — stored once (compare-and-swap) with the vectors its commit will need, so a
redelivered task reuses them and never calls the model twice. No transaction is held while
the model is asked."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.utils import timezone

from memory import metrics
from memory.domain import UNSETTLED_STATES, EvidenceState, render
from memory.domain.admission import Refused, check_facts
from memory.llm.conversation import extract_conversation
from memory.llm.embedding import EmbeddingError
from memory.llm.errors import ModelError, is_transport
from memory.llm.extraction import extract_text, runs_locally
from memory.llm.vectors import observation_vectors
from memory.models import Evidence

from ..admission import limits
from ..planning import Ahead, ModelUnavailable
from ..settle import notify_settled
from ..shown import heads_shown

UNSETTLED = UNSETTLED_STATES


class ExtractionFailed(ModelUnavailable):
    """The model (or the embedder) could not be reached for an observation's extraction,
    after the client's retries: the task retries it later."""



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
    return extraction(evidence)[0]


class FactsRefused(ModelError):
    """What an observation yielded is more than the API takes (CONTRACT "Input that is
    refused": 500 facts, however they arose): it fails whole, nothing of it committed."""

    reason = "refused"


def extraction(evidence: Evidence, ahead: Sequence[Ahead] = (),
               ) -> tuple[dict[str, Any], ModelError | None]:
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
        return extract_claimed(evidence_id, ahead)
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


def extract_claimed(evidence_id: int, ahead: Sequence[Ahead] = ()) -> bool:
    evidence = Evidence.objects.defer("embedding").get(pk=evidence_id)
    if evidence.state not in UNSETTLED:
        return False
    if evidence.extracted is not None:
        return True
    result, failure = extraction(evidence, ahead)  # model calls: outside any transaction
    costs = {"chat_calls": result["chat_calls"], "prompt_tokens": result["prompt_tokens"],
             "completion_tokens": result["completion_tokens"]}
    unsettled = Evidence.objects.filter(pk=evidence_id, extracted__isnull=True,
                                        state__in=UNSETTLED)
    if is_transport(failure):
        raise ExtractionFailed(failure, f"extraction failed: {failure}",
                               evidence_id=evidence_id) from failure
    if failure is not None:
        if unsettled.update(extracted=result, state=EvidenceState.FAILED,
                            error=f"extraction failed: {failure}"[:2000], **costs):
            notify_settled([evidence_id])
            metrics.OBSERVATIONS_FAILED.labels(reason="extraction").inc()
        return False
    try:
        vectors = observation_vectors(text=evidence_text(evidence), facts=result["facts"])
    except EmbeddingError as exc:
        raise ExtractionFailed(exc.cause, f"extraction failed: embedding failed: {exc}",
                               evidence_id=evidence_id) from exc
    if vectors.cache:
        result["vectors"] = vectors.cache
    unsettled.update(extracted=result, state=EvidenceState.PROCESSING,
                     embedding=vectors.evidence, embed_calls=vectors.embed_calls, **costs)
    return True



def extract_waiting(evidence_id: int, ahead: Sequence[Ahead] = ()) -> None:
    """Extract it under its claim, waiting for a task that holds the claim to finish (it
    then finds the extraction stored, and makes no call)."""
    with connection.cursor() as cur:
        cur.execute("SELECT pg_advisory_lock(%s::bigint)", [evidence_id])
    try:
        extract_claimed(evidence_id, ahead)
    finally:
        _release_extraction(evidence_id)
