"""Preparing an observation for its commit: everything computed before the transaction
opens — its extraction (without a model, done now), every vector the commit installs, and,
with a model, its plan (on what the earlier observations' plans leave, where it may)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from memory.domain import Plan
from memory.llm.vectors import Vectors, commit_vectors, observation_vectors
from memory.models import Evidence

from ..planning import Ahead, plan_with_model
from ..settle import Settled
from .extract import FactsRefused, evidence_text, extraction


@dataclass
class Prepared:
    """An observation ready to commit: everything computed outside the transaction."""

    evidence: Evidence
    facts: list[dict[str, Any]]  # planned inside the commit, on the overlay (no model)
    plan: Plan | None  # planned before it (with a model): applied as it is
    vectors: Vectors  # what the commit may install (text -> vector)
    settled: Settled
    cached: dict[str, str] = field(default_factory=dict)  # packed vectors, for the refresh


def prepare(evidence: Evidence, *, local: bool, ahead: Sequence[Ahead] = ()) -> Prepared:
    """Extraction (local: now, if the drain extracts it) and every vector the commit needs,
    computed before its transaction opens; with a model, the plan too (on what the earlier
    observations' plans in ``ahead`` leave, where it may)."""
    if local:
        stored = evidence.extracted is not None
        result, failure = (({k: v for k, v in (evidence.extracted or {}).items()
                             if k != "vectors"}, None) if stored else extraction(evidence))
        if isinstance(failure, FactsRefused):
            raise failure
        vector = None if stored else observation_vectors(text=evidence_text(evidence),
                                                         facts=[]).evidence
        facts = list(result.get("facts", []))
        return Prepared(evidence, facts, None,
                         commit_vectors(((f.get("key"), f.get("value")) for f in facts), {}),
                         Settled(evidence.pk, None if stored else result, vector))
    extracted = dict(evidence.extracted or {})
    slim = "vectors" in extracted  # the cached vectors serve this commit: keep the row small
    cached = extracted.pop("vectors", None) or {}
    plan = plan_with_model(namespace=evidence.namespace, facts=list(extracted.get("facts", [])),
                           actor=evidence.actor, vectors=cached, evidence=evidence,
                           shown=extracted.get("shown") or (), ahead=ahead)
    return Prepared(
        evidence, [], plan, commit_vectors(((i.key, i.value) for i, _ in plan.items), cached),
        Settled(evidence.pk, extracted if slim else None, chat_calls=plan.chat_calls,
                embed_calls=plan.embed_calls, prompt_tokens=plan.prompt_tokens,
                completion_tokens=plan.completion_tokens),
        cached)
