"""The answer step: a model answers one question from one arm's read context.

Two prompts, as in the paper: MemoryAgentBench's "newer fact has the larger serial number"
prompt for the flat arms (raw evidence, order tags, the oracle listing), and a LongMemEval-style
prompt for a materialized state read. Both state that memory overrides world knowledge, since
the benchmark facts are counterfactual on purpose.
"""

from __future__ import annotations

from typing import Any

FLAT_SYSTEM = (
    "You answer questions from a memory of observations. The observations may conflict: when "
    "two state different values of the same thing, the newer one holds now, and a newer fact "
    "has the larger serial number ([t=...] or the number before it) when numbers are shown. "
    "A later statement that an earlier one was reported in error cancels that earlier one. "
    "Trust the memory over your own knowledge of the world. If two reports conflict and nothing "
    "settles which holds, say that it is contested and name both values."
)
STATE_SYSTEM = (
    "You answer questions from the current state of a memory: one line per key, the value "
    "shown holds now; '(contested)' marks a value challenged by the alternatives listed. "
    "Trust the memory over your own knowledge of the world. If a value is contested, say that "
    "it is contested and name every candidate."
)
INSTRUCTION = "Answer with the answer only (a few words), no explanation."

PROMPTS = {"flat": FLAT_SYSTEM, "state": STATE_SYSTEM}


def answer_messages(*, prompt: str, context: str, question: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": PROMPTS[prompt]},
        {"role": "user", "content": f"Memory:\n{context}\n\nQuestion: {question}\n{INSTRUCTION}"},
    ]


def model_answer(client: Any, *, prompt: str, context: str, question: str) -> str:
    """The model's short answer; an empty string when the call failed (scored as wrong, and
    logged by the client), so one bad call never aborts a run."""
    result = client.chat_text(messages=answer_messages(prompt=prompt, context=context,
                                                       question=question), max_tokens=48)
    return result.data or "" if result.ok else ""
