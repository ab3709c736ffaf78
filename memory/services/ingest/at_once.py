"""Recording and committing an observation in ONE transaction (one WAL flush, not two), for
callers that wait for the commit anyway: without a model, when the caller gets the
namespace's drain and nothing is ahead of the observation. When it cannot be, nothing of it
was kept and the caller records it the usual way."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
from django.utils import timezone

from memory import metrics
from memory.domain import EvidenceState
from memory.llm.extraction import runs_locally
from memory.models import Evidence, Namespace

from ..batch import Applied
from ..binding import pipelined
from ..embeddings import messages_after_commit
from ..frontier import STALE_COUNT_SQL, frontier_flush_if_due
from ..settle import Settled
from .commit import after_commit, commit_transaction, count_committed, retrying
from .extract import FactsRefused
from .line import ANY_UNSETTLED_SQL, LOCK_CLASS, UNSETTLED, in_transaction, try_lock, unlock
from .plan import prepare
from .record import idempotency_digest, request_digest, take_seqs

log = logging.getLogger("pmem.observations")


def ingest_at_once(*, namespace: Namespace, text: str, facts: list[dict[str, Any]] | None,
                   source: str, observed_at: datetime | None, actor: str,
                   hand_on: Callable[[int], None], idempotency_key: str | None = None,
                   messages: list[dict[str, Any]] | None = None,
                   extract: bool = False) -> Evidence | None:
    """:func:`observation_ingest` in one transaction, or None when it cannot be (a model is
    configured, another drainer holds the namespace, an earlier observation is unsettled,
    the idempotency key was used, or the transaction failed: nothing of it was kept)."""
    if not runs_locally() or in_transaction() or not try_lock(namespace.pk):
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
            prepared = prepare(evidence, local=True)  # every vector, before the transaction
        except FactsRefused:
            return None  # recorded on its own, then failed by the drain, saying why

        def record_and_commit() -> tuple[dict[int, list[Applied]], list[datetime]]:
            with transaction.atomic():
                if not insert_settled(evidence, prepared.settled):
                    raise _Behind  # earlier observations commit first; or a replay
                prepared.settled = replace(prepared.settled, evidence_id=evidence.pk)
                return commit_transaction([prepared], recorded=True)

        try:
            out, received = retrying("an observation recorded and committed at once",
                                     record_and_commit)
        except _Behind:
            return None  # earlier observations commit first, in seq order
        except Exception:
            log.warning("ingest in one transaction failed; recording it on its own",
                        exc_info=True)
            return None
        metrics.OBSERVATIONS_RECORDED.inc()
        count_committed(received)
        if out.get(evidence.pk):
            evidence.embed_calls += after_commit(evidence, out[evidence.pk], prepared.cached)
        stale, more = _release_and_look(namespace.pk)
        held = False
    finally:
        if held:
            unlock(namespace.pk)
    frontier_flush_if_due(namespace_id=namespace.pk, stale=stale)
    if evidence.messages:  # a session: its messages' vectors
        messages_after_commit(namespace_id=namespace.pk)
    if more:  # one that tried the drain meanwhile left it to us
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
        unlock.execute("SELECT pg_advisory_unlock(%s, %s)", [LOCK_CLASS, namespace_id])
        look.execute(ANY_UNSETTLED_SQL, [namespace_id, *[str(s) for s in UNSETTLED]])
        return int(count.fetchone()[0]), bool(look.fetchone()[0])


class _Behind(Exception):
    """An earlier observation of the namespace is unsettled (this one must wait its turn), or
    the idempotency key was used: the usual way answers it."""


def insert_settled(evidence: Evidence, settled: Settled) -> bool:
    """Take the namespace's next seq and insert ``evidence`` as it will be once its commit
    (in this same transaction) is done: committed, with what extraction found and what it
    cost — one tuple, each index entry written once. Inserts nothing and returns False
    when an earlier observation of the namespace is unsettled, or ``evidence``'s
    idempotency key was used.

    The INSERT follows :func:`take_seqs`: its snapshot is taken once the namespace row
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
    evidence.seq = take_seqs(evidence.namespace, 1)
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
