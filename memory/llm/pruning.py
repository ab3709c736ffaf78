"""The pruned turn read's model step (SPEC §7): which of two retrieved observations states a
superseded value of the queried attribute. The model judges values only; the dates, which the
caller passes, decide which of two conflicting observations is the stale one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from . import prompts
from .client import ModelClient
from .embedding import cosine

#: Pairs less similar than this are never shown to the model.
PRUNE_SIMILARITY = 0.55


@dataclass(frozen=True)
class Candidate:
    """One retrieved observation: its id, date, arrival seq, line and embedding."""

    id: int
    day: date
    seq: int
    line: str
    embedding: Any


def _yes(client: ModelClient, prompt: str) -> bool:
    result = client.chat_text(messages=[{"role": "user", "content": prompt}], max_tokens=3,
                              kind="prune")
    return bool(result.data) and str(result.data).strip().lower().startswith("yes")


def asks_current_value(client: ModelClient, query: str) -> bool:
    """The gate: does the question ask for a value that may have changed over time?"""
    return _yes(client, prompts.GATE_PROMPT.format(query=query))


def superseded(client: ModelClient, query: str, candidates: Sequence[Candidate]) -> set[int]:
    """Ids of the observations to drop: for each pair with cosine ≥ ``PRUNE_SIMILARITY`` and
    different dates whose values the model says differ, the earlier one."""
    dropped: set[int] = set()
    for x, a in enumerate(candidates):
        for b in candidates[x + 1:]:
            if a.id in dropped or b.id in dropped or a.day == b.day:
                continue
            if cosine(a.embedding, b.embedding) < PRUNE_SIMILARITY:
                continue
            if _yes(client, prompts.PRUNE_PROMPT.format(query=query, a=a.line, b=b.line)):
                dropped.add(min(a, b, key=lambda c: (c.day, c.seq)).id)
    return dropped
