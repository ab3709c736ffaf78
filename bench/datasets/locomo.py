"""LoCoMo (snap-research, CC BY-NC 4.0: evaluation only, never shipped): every conversation
ingested turn by turn, questions of categories 1-4 answered from each read, token F1."""

from __future__ import annotations

import json
from typing import Any

from ..arms import PMemSession
from .common import ARMS, ingest_turns, read_and_answer, summarise, token_f1

SCORED_CATEGORIES = (1, 2, 3, 4)  # 5 (adversarial) needs an abstention judge


def _turns(conversation: dict[str, Any]) -> list[str]:
    turns = []
    n = 1
    while f"session_{n}" in conversation:
        date = conversation.get(f"session_{n}_date_time", "")
        turns += [f"[{date}] {t['speaker']}: {t['text']}" for t in conversation[f"session_{n}"]]
        n += 1
    return turns


def run(config: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    samples = json.loads(config.dataset.read_text())
    scores: dict[str, list[tuple[float, int]]] = {arm: [] for arm in ARMS}
    limit = config.cases
    asked = 0
    for done, sample in enumerate(samples, start=1):
        session = PMemSession(config.run_id, "locomo")
        session.begin(str(sample["sample_id"]))
        ingest_turns(session, _turns(sample["conversation"]))
        for qa in sample["qa"]:
            if qa.get("category") not in SCORED_CATEGORIES or (limit and asked >= limit):
                continue
            gold = str(qa["answer"])
            if qa["category"] == 3:
                gold = gold.split(";")[0]
            asked += 1
            for arm in ARMS:
                answer, size = read_and_answer(session, config.client, arm, qa["question"])
                scores[arm].append((token_f1(answer, gold), size))
        config.progress(done, len(samples))
        if limit and asked >= limit:
            break
    cfg = {"run_id": config.run_id, "model": config.model, "dataset": str(config.dataset),
           "metric": "token F1 (no stemming)", "categories": list(SCORED_CATEGORIES)}
    return cfg, summarise(scores)
