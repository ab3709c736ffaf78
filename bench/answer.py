"""The answer step for benchmark arms: the product's own (``memory.llm.readout``), so what
the benchmark measures is what users run."""

from __future__ import annotations

from typing import Any

from memory.llm.readout import PROMPTS, answer_messages
from memory.llm.readout import answer as _answer

__all__ = ["PROMPTS", "answer_messages", "model_answer"]


def model_answer(client: Any, *, prompt: str, context: str, question: str) -> str:
    """The model's short answer; an empty string when the call failed (scored as wrong, and
    logged by the client), so one bad call never aborts a run."""
    return _answer(client, question=question, context=context, prompt=prompt).answer
