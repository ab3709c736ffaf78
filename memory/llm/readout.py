"""Model-backed reading (SPEC §7, paper §3.4 / B.4): the answer step and one step of the
iterative readout.

:func:`answer` lets a model answer from any read's context: the state prompt for materialized
cells, MemoryAgentBench's "the newer fact has the larger serial number" prompt for flat
evidence reads. :func:`lookup_step` is one round of the iterative readout: the model either
answers or names an entity and a relation to look up (the loop, which reads memory, is
:func:`memory.reads.iterative_answer`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import prompts
from .client import ModelClient

PROMPTS = prompts.ANSWER_PROMPTS
INSTRUCTION = prompts.ANSWER_INSTRUCTION
answer_messages = prompts.answer_messages


@dataclass
class AnswerResult:
    answer: str
    context: str
    context_chars: int
    chat_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    lookups: list[dict[str, str]] = field(default_factory=list)
    error: str | None = None
    mode: str = ""  # the read mode whose context it answered from

    @property
    def cost(self) -> dict[str, int]:
        return {"chat_calls": self.chat_calls, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens}

    def add_cost(self, *, prompt_tokens: int, completion_tokens: int) -> None:
        self.chat_calls += 1
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens


def answer(client: ModelClient, *, question: str, context: str,
           prompt: str = "state") -> AnswerResult:
    """One call; an empty answer with ``error`` set when the model failed (never raises)."""
    result = client.chat_text(messages=answer_messages(prompt=prompt, context=context,
                                                       question=question), max_tokens=64,
                              kind="answer")
    return AnswerResult(
        answer=(result.data or "").strip() if result.ok else "", context=context,
        context_chars=len(context), chat_calls=1, prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        error=None if result.failure is None else str(result.failure),
    )


@dataclass(frozen=True)
class LookupStep:
    """The model's move: ``answer`` (with the answer), ``lookup`` (entity and relation), or
    ``malformed`` (anything else: the caller forces an answer)."""

    action: str
    answer: str = ""
    entity: str = ""
    relation: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0


def lookup_step(client: ModelClient, *, question: str, context: str) -> LookupStep:
    """One round of the iterative readout: answer from ``context``, or ask for more."""
    reply = client.chat_json(messages=prompts.lookup_messages(context=context, question=question),
                             schema=prompts.LOOKUP_SCHEMA, schema_name=prompts.READOUT,
                             kind="answer")
    data: dict[str, Any] = reply.data if isinstance(reply.data, dict) else {}
    tokens = (reply.prompt_tokens, reply.completion_tokens)
    if data.get("action") == "answer" and str(data.get("answer", "")).strip():
        return LookupStep("answer", str(data["answer"]).strip(), "", "", *tokens)
    if data.get("action") != "lookup":
        return LookupStep("malformed", "", "", "", *tokens)
    return LookupStep("lookup", "", str(data.get("entity", "")), str(data.get("relation", "")),
                      *tokens)
