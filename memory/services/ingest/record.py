"""Recording an observation: one short transaction that takes the namespace's next seq and
stores the evidence, pending. Nothing else happens before it commits (SPEC §5)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from memory import metrics
from memory.models import Evidence, Namespace


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
        seq = take_seqs(namespace, 1)
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
        first = take_seqs(namespace, len(observations))
        rows = Evidence.objects.bulk_create([
            Evidence(namespace=namespace, seq=first + i, text=item.get("text") or "",
                     facts=item.get("facts"), source=item.get("source") or "",
                     observed_at=item.get("observed_at"), actor=actor,
                     messages=item.get("messages") or None,
                     extract_text=bool(item.get("extract")))
            for i, item in enumerate(observations)])
    metrics.OBSERVATIONS_RECORDED.inc(len(rows))
    return rows


def take_seqs(namespace: Namespace, n: int) -> int:
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

