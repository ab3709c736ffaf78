"""What the dataset runners share: ingest a conversation, read it two ways, answer."""

from __future__ import annotations

import re
from collections import Counter
from statistics import mean
from typing import Any

from memory.reads import READ_MODES, read

from ..answer import model_answer
from ..arms import PMemSession
from ..scenarios.common import Event

K = 12
ARMS = ("commit", "raw_top12")


def ingest_turns(session: PMemSession, turns: list[str]) -> None:
    """Each dated turn is one observation, in conversation order."""
    for seq, text in enumerate(turns, start=1):
        session.ingest(Event(seq, "", text, "accept", ""))


#: The read mode (memory.reads.READ_MODES) each arm answers from.
ARM_MODES = {"commit": "frontier_cosine", "raw_top12": "raw"}


def read_and_answer(session: PMemSession, client: Any, arm: str, question: str) -> tuple[str, int]:
    """The model's answer from one read (frontier cells or raw top-12 turns), and its size."""
    mode = READ_MODES[ARM_MODES[arm]]
    context = read(mode.name, namespace=session.namespace, query=question, k=K).context
    return model_answer(client, prompt=mode.prompt, context=context, question=question), len(context)


_TOKEN = re.compile(r"[0-9a-z]+")


def token_f1(prediction: str, gold: str) -> float:
    """Token-overlap F1 (LoCoMo's metric, without its Porter stemming: no stemmer is shipped)."""
    pred, ref = _TOKEN.findall(prediction.lower()), _TOKEN.findall(gold.lower())
    common = sum((Counter(pred) & Counter(ref)).values())
    if not pred or not ref or common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def summarise(scores: dict[str, list[tuple[float, int]]], **axis: Any) -> list[dict[str, Any]]:
    """One row per arm: mean score in percent, n, mean context size."""
    return [{"arm": arm, **axis, "status": "run", "n": len(rows),
             "accuracy": round(100 * mean(s for s, _ in rows), 1) if rows else None,
             "context_chars": round(mean(c for _, c in rows), 1) if rows else None}
            for arm, rows in scores.items()]
