"""Committing prepared observations: ONE transaction for a group of consecutive ones — their
evidence rows locked, the cells of every key they name locked once (one batch), each planned,
unless it came planned, on the overlay of the previous ones' decisions, everything written
with one statement per table — run again when PostgreSQL aborts it as a deadlock victim."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import TypeVar

from django.db import OperationalError, transaction
from django.db.models import F
from django.utils import timezone

from memory import metrics
from memory.llm.extraction import runs_locally
from memory.llm.vectors import Vectors
from memory.models import Cell, Evidence, KeyAlias, Namespace

from ..batch import Applied, Batch
from ..binding import pipelined
from ..embeddings import messages_after_commit, refresh_after_commit
from ..planning import plan_facts
from ..settle import mark_committed, notify_settled
from .line import UNSETTLED
from .plan import Prepared, prepare

log = logging.getLogger("pmem.observations")


def observation_commit(*, evidence: Evidence) -> list[Applied]:
    """Prepare (with a model: annotate, outside a transaction) and apply all facts of one
    extracted observation in one transaction: a group of one. The caller must hold the
    namespace's drain lock."""
    return commit_prepared([prepare(evidence, local=runs_locally())]).get(evidence.pk, [])



def commit_prepared(prepared: list[Prepared]) -> dict[int, list[Applied]]:
    """Commit consecutive observations in ONE transaction: their evidence rows locked, the
    cells of every key they name locked once (one batch), each planned — unless it came
    planned — on the overlay of the previous ones' decisions, everything written with one
    statement per table. Run again when PostgreSQL aborts it as a deadlock victim."""
    first = prepared[0].evidence
    with metrics.timed(metrics.COMMIT_SECONDS):
        out, received = retrying(f"{len(prepared)} observation(s) from seq {first.seq}",
                                 lambda: commit_transaction(prepared))
    count_committed(received)
    for p in prepared:
        if out.get(p.evidence.pk):
            after_commit(p.evidence, out[p.evidence.pk], p.cached)
    if any(p.evidence.messages for p in prepared):  # sessions: their messages' vectors
        messages_after_commit(namespace_id=first.namespace_id)
    return out


def count_committed(received: list[datetime]) -> None:
    """The metrics of a commit: how many it committed, each one's time from receipt."""
    now = timezone.now()
    metrics.OBSERVATIONS_COMMITTED.inc(len(received))
    for at in received:
        metrics.SETTLE_SECONDS.observe(max(0.0, (now - at).total_seconds()))


def commit_transaction(prepared: list[Prepared], *, recorded: bool = False,
                       ) -> tuple[dict[int, list[Applied]], list[datetime]]:
    """The transaction of :func:`commit_prepared`: the operations by evidence id, and when each
    observation it committed was received. ``recorded``: the caller inserted these evidence
    rows, already committed (:func:`insert_settled`), in its own open transaction, which
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
            if recorded:  # inserted as committed (insert_settled): only the notice
                notify_settled([row.pk for row, _ in live])
            else:
                mark_committed([p.settled for _, p in live], now)
    return out, [row.received_at for row, _ in live]


def _open_batch(namespace: Namespace, prepared: list[Prepared]) -> Batch:
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


def retrying(what: str, commit: Callable[[], T], attempts: int = 3) -> T:
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


def after_commit(evidence: Evidence, applied: list[Applied], vectors: dict[str, str]) -> int:
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

