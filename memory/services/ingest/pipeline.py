"""The drain and in-process ingest composed: which drain strategy runs (in order without a
model, planned ahead with one), and recording plus committing in one call for callers that
wait (benchmarks, the demo loader, tests, the API's ``wait=1``). The only module of the
package that knows every step; none of the steps imports it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from memory.llm.extraction import runs_locally
from memory.models import Evidence, Namespace

from .adopt import Adoption
from .ahead import drain_ahead
from .at_once import ingest_at_once
from .drain import drain, drain_in_order
from .extract import observation_extract
from .record import observation_record, observations_record


def namespace_drain(*, namespace_id: int, limit: int | None = None,
                    deadline: float | None = None, give_up_at: float | None = None,
                    adoption: Adoption | None = None) -> int:
    """Commit every observation of the namespace that is next in seq order
    (:func:`.drain.drain`): without a model in groups of one transaction each, with one
    planned ahead on threads while the head commits (:mod:`.ahead`). Returns how many it
    committed."""
    return drain(namespace_id=namespace_id, strategy=_by_model, limit=limit,
                 deadline=deadline, give_up_at=give_up_at, adoption=adoption)


def _by_model(namespace_id: int, *, room: int | None, deadline: float | None,
              give_up_at: float | None, adoption: Adoption | None) -> int:
    # Asked at each turn of the lock, as the configured model is read at each call.
    strategy = drain_in_order if runs_locally() else drain_ahead
    return strategy(namespace_id, room=room, deadline=deadline, give_up_at=give_up_at,
                    adoption=adoption)


def _drain_on(namespace_id: int) -> None:
    namespace_drain(namespace_id=namespace_id)


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
    at_once = ingest_at_once(namespace=namespace, text=text or "", facts=facts,
                             source=source, observed_at=observed_at, actor=actor,
                             messages=messages, extract=extract, hand_on=_drain_on)
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
    return ingest_at_once(namespace=namespace, text=text, facts=facts, source=source,
                          observed_at=observed_at, actor=actor,
                          idempotency_key=idempotency_key, hand_on=hand_on,
                          messages=messages, extract=extract)


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
