"""LongMemEval (downloaded by the user): per question its haystack ingested turn by turn,
answered from each read, judged gold-aware by the same model (paper B.1, one-word verdict)."""

from __future__ import annotations

import json
from typing import Any

from ..arms import PMemSession
from ..scenarios.factconsolidation import substring_exact_match
from .common import ARMS, ingest_turns, read_and_answer, summarise

JUDGE = ("Question: {question}\nGold answer: {gold}\nResponse: {answer}\n"
         "Does the response give the gold answer (for an updated fact, the current value)? "
         "Answer yes or no.")


def _turns(item: dict[str, Any]) -> list[str]:
    dates = item.get("haystack_dates") or [""] * len(item["haystack_sessions"])
    return [f"[{date}] {turn['role']}: {turn['content']}"
            for date, session in zip(dates, item["haystack_sessions"], strict=False)
            for turn in session]


def _judge(client: Any, question: str, gold: str, answer: str) -> bool:
    if substring_exact_match(answer, gold):
        return True
    result = client.chat_text(messages=[{"role": "user", "content": JUDGE.format(
        question=question, gold=gold, answer=answer)}], max_tokens=3)
    return bool(result.ok and str(result.data).strip().lower().startswith("yes"))


def run(config: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    items = json.loads(config.dataset.read_text())[: config.cases or None]
    scores: dict[str, list[tuple[float, int]]] = {arm: [] for arm in ARMS}
    for done, item in enumerate(items, start=1):
        session = PMemSession(config.run_id, "longmemeval")
        session.begin(str(item["question_id"]))
        ingest_turns(session, _turns(item))
        question = f"(asked on {item.get('question_date', '')}) {item['question']}"
        for arm in ARMS:
            answer, size = read_and_answer(session, config.client, arm, question)
            scores[arm].append((float(_judge(config.client, item["question"],
                                             str(item["answer"]), answer)), size))
        config.progress(done, len(items))
    cfg = {"run_id": config.run_id, "model": config.model, "dataset": str(config.dataset),
           "judge": "same model, gold-aware yes/no"}
    return cfg, summarise(scores)
