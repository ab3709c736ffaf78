"""Reads for agents by mode (SPEC §7): the one registry of read modes, and the reads that
need a model.

A mode is one :class:`ReadMode` entry — what it is (:mod:`memory.domain.readmodes`: its name,
title, help text, default ``k``, whether it needs a model, the answer prompt that reads its
context) and the function that reads — and the API, the explorer, the answer step and the
benchmarks all take their modes from :data:`READ_MODES`. Selectors
never call a model: the pruned read and the iterative answer compose selectors with the model
steps of :mod:`memory.llm` here, above both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from memory.domain.readmodes import ANSWER_MODE_NAMES, ITERATIVE, READ_MODE_SPECS, ReadModeSpec
from memory.llm import pruning
from memory.llm.client import ModelClient, client_from_settings
from memory.llm.readout import AnswerResult, answer, lookup_step
from memory.selectors.evidence import evidence_read
from memory.selectors.filtered import frontier_read_filtered, with_min_score
from memory.selectors.recall import frontier_hybrid_read
from memory.selectors.search import (
    FRONTIER_HEADER,
    RAW_HEADER,
    ReadResult,
    evidence_for_pruning,
    evidence_line,
    frontier_read,
    frontier_read_as_of,
    raw_read,
)


@dataclass(frozen=True)
class ReadMode:
    """A read mode: what it is (:class:`memory.domain.readmodes.ReadModeSpec`) and the function
    that reads, ``(namespace=, query=, k=, disclose=, gate=, as_of=) -> ReadResult``; a mode
    that reads cells also takes ``metadata=``, the facts' filter."""

    spec: ReadModeSpec
    read: Callable[..., ReadResult]

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def title(self) -> str:
        return self.spec.title

    @property
    def help(self) -> str:
        return self.spec.help

    @property
    def default_k(self) -> int:
        return self.spec.default_k

    @property
    def needs_model(self) -> bool:
        return self.spec.needs_model

    @property
    def prompt(self) -> str:
        return self.spec.prompt


def _frontier(*, namespace: Any, query: str, k: int, disclose: Iterable[str],
              gate: bool, as_of: datetime | None,
              metadata: dict[str, Any] | None = None) -> ReadResult:
    if as_of is not None:
        return frontier_read_as_of(namespace=namespace, query=query, k=k, disclose=disclose,
                                   as_of=as_of, metadata=metadata or None)
    # Filtered or not, scored as the hybrid read: one min_score scale.
    return frontier_hybrid_read(namespace=namespace, query=query, k=k, disclose=disclose,
                                metadata=metadata or None)


def _frontier_cosine(*, namespace: Any, query: str, k: int, disclose: Iterable[str],
                     gate: bool, as_of: datetime | None = None,
                     metadata: dict[str, Any] | None = None) -> ReadResult:
    if as_of is not None:  # the past is ranked by cosine in either mode
        if metadata:
            return frontier_read_as_of(namespace=namespace, query=query, k=k,
                                       disclose=disclose, as_of=as_of, metadata=metadata)
        return replace(frontier_read_as_of(namespace=namespace, query=query, k=k,
                                           disclose=disclose, as_of=as_of),
                       mode="frontier_cosine")
    if metadata:
        return frontier_read_filtered(namespace=namespace, query=query, metadata=metadata, k=k,
                                      disclose=disclose)
    return frontier_read(namespace=namespace, query=query, k=k, disclose=disclose)


def _raw(*, namespace: Any, query: str, k: int, disclose: Iterable[str],
         gate: bool, as_of: datetime | None) -> ReadResult:
    return raw_read(namespace=namespace, query=query, k=k, as_of=as_of)


def _evidence(*, namespace: Any, query: str, k: int, disclose: Iterable[str],
              gate: bool, as_of: datetime | None) -> ReadResult:
    return evidence_read(namespace=namespace, query=query, k=k, as_of=as_of)


def _raw_ordered(*, namespace: Any, query: str, k: int, disclose: Iterable[str],
                 gate: bool, as_of: datetime | None) -> ReadResult:
    return raw_read(namespace=namespace, query=query, k=k, ordered=True, as_of=as_of)


def _pruned(*, namespace: Any, query: str, k: int, disclose: Iterable[str],
            gate: bool, as_of: datetime | None) -> ReadResult:
    return pruned_read(namespace=namespace, query=query, k=k, gate=gate, as_of=as_of)


_READERS: dict[str, Callable[..., ReadResult]] = {
    "frontier": _frontier, "frontier_cosine": _frontier_cosine, "raw": _raw,
    "evidence": _evidence, "raw_ordered": _raw_ordered, "pruned": _pruned}
#: Every read mode, in the order the explorer compares them (a mode without a function here
#: fails at import, not at its first read).
READ_MODES: dict[str, ReadMode] = {spec.name: ReadMode(spec, _READERS[spec.name])
                                   for spec in READ_MODE_SPECS}
ANSWER_MODES: tuple[str, ...] = ANSWER_MODE_NAMES


def read(mode: str, *, namespace: Any, query: str, k: int | None = None,
         disclose: Iterable[str] = (), gate: bool = False, as_of: datetime | None = None,
         metadata: dict[str, Any] | None = None, min_score: float | None = None) -> ReadResult:
    """Read ``namespace`` for ``query`` in ``mode`` (a key of :data:`READ_MODES`), now or as
    memory was at ``as_of`` (SPEC §9); ``metadata``: only the facts whose current version's
    metadata holds each entry (a mode that reads cells: the others take none); ``min_score``:
    without the items scored below it."""
    entry = READ_MODES[mode]
    narrowed = {"metadata": metadata} if metadata else {}
    result = entry.read(namespace=namespace, query=query, k=k or entry.default_k,
                        disclose=tuple(disclose), gate=gate, as_of=as_of, **narrowed)
    return result if min_score is None else with_min_score(result, min_score)


def pruned_read(*, namespace: Any, query: str, k: int = 12, gate: bool = False,
                as_of: datetime | None = None) -> ReadResult:
    """Raw top-k evidence with superseded statements pruned (SPEC §7): for each pair with
    cosine ≥ 0.55 and different dates, the model says whether both state different values of
    the queried attribute; on yes the earlier one is dropped. The date decides which is
    stale — the model never judges recency. Without a model it says so and returns nothing."""
    client = client_from_settings()
    if client is None:
        return ReadResult("pruned", "", [], 0, available=False,
                          note="the pruned read needs a model: set PMEM_LLM_BASE_URL")
    raw = raw_read(namespace=namespace, query=query, k=k, as_of=as_of)
    if gate and not pruning.asks_current_value(client, query):
        return ReadResult("pruned", raw.context, raw.items, raw.context_chars,
                          note="gate: the question does not ask for a current value; not pruned")
    rows = evidence_for_pruning([i["id"] for i in raw.items])
    dropped = pruning.superseded(client, query, [
        pruning.Candidate(e.id, (e.observed_at or e.received_at).date(), e.seq, evidence_line(e),
                          e.embedding) for e in (rows[i["id"]] for i in raw.items)])
    items = [i for i in raw.items if i["id"] not in dropped]
    context = "\n".join([RAW_HEADER, *(i["text"] for i in items)])
    return ReadResult("pruned", context, items, len(context),
                      note=f"pruned {len(dropped)} superseded observation(s)")


# --- the answer step ----------------------------------------------------------------------------

MAX_LOOKUPS = 3
CELLS_PER_LOOKUP = 6


def model_answer(mode: str, *, client: ModelClient, namespace: Any, query: str,
                 k: int | None = None, disclose: Iterable[str] = (),
                 gate: bool = False) -> AnswerResult:
    """A model answers ``query`` from a read in ``mode`` (one of :data:`ANSWER_MODES`)."""
    if mode == ITERATIVE:
        result = iterative_answer(client, namespace=namespace, question=query, k=k or 12,
                                  disclose=tuple(disclose))
    else:
        context = read(mode, namespace=namespace, query=query, k=k, disclose=disclose,
                       gate=gate).context
        result = answer(client, question=query, context=context, prompt=READ_MODES[mode].prompt)
    result.mode = mode
    return result


def iterative_answer(client: ModelClient, *, namespace: Any, question: str, k: int = 12,
                     disclose: tuple[str, ...] = (), mode: str = "frontier") -> AnswerResult:
    """Frontier top-k, then up to three lookups of six new cells each, then an answer
    (paper B.4). ``mode`` is the frontier read it looks up with (``frontier_cosine``: the
    paper's)."""
    def frontier(query: str, k: int) -> ReadResult:
        return READ_MODES[mode].read(namespace=namespace, query=query, k=k, disclose=disclose,
                                     gate=False, as_of=None)

    first = frontier(question, k)
    lines = [item["line"] for item in first.items]
    seen = {item["key"] for item in first.items}
    out = AnswerResult(answer="", context=first.context, context_chars=first.context_chars)
    for _ in range(MAX_LOOKUPS):
        context = "\n".join([FRONTIER_HEADER, *lines])
        step = lookup_step(client, question=question, context=context)
        out.add_cost(prompt_tokens=step.prompt_tokens, completion_tokens=step.completion_tokens)
        if step.action == "answer":
            out.answer, out.context, out.context_chars = step.answer, context, len(context)
            return out
        if step.action != "lookup":
            break  # malformed: force the answer now
        query = f"{step.entity} {step.relation}".strip() or question
        more = frontier(query, CELLS_PER_LOOKUP + len(seen))
        fresh = [i for i in more.items if i["key"] not in seen][:CELLS_PER_LOOKUP]
        seen |= {i["key"] for i in fresh}
        lines += [i["line"] for i in fresh]
        out.lookups.append({"entity": step.entity, "relation": step.relation,
                            "found": str(len(fresh))})
    context = "\n".join([FRONTIER_HEADER, *lines])
    forced = answer(client, question=question, context=context, prompt="state")
    out.answer, out.context, out.context_chars = forced.answer, context, len(context)
    out.add_cost(prompt_tokens=forced.prompt_tokens, completion_tokens=forced.completion_tokens)
    out.error = forced.error
    return out
