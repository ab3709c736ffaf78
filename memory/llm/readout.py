"""Model-backed reading (SPEC §7, paper §3.4 / B.4): the answer step and iterative readout.

``answer`` lets a model answer from any read's context: the state prompt for materialized
cells, MemoryAgentBench's "the newer fact has the larger serial number" prompt for flat
evidence reads. ``iterative_answer`` starts from a frontier read and lets the model issue up to
three lookups (entity + relation), each retrieving six more cells, deduplicated, before an
answer is forced.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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

LOOKUP_SYSTEM = STATE_SYSTEM + (
    " If the memory shown is not enough, you may look up more memory by naming an entity and a "
    "relation (for a question that chains facts, look up the next hop). Reply with JSON only: "
    '{"action": "lookup", "entity": "...", "relation": "..."} or '
    '{"action": "answer", "answer": "..."}.'
)
LOOKUP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": ["lookup", "answer"]},
        "entity": {"type": "string"},
        "relation": {"type": "string"},
        "answer": {"type": "string"},
    },
    "required": ["action"],
    "additionalProperties": False,
}
MAX_LOOKUPS = 3
CELLS_PER_LOOKUP = 6


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


def answer_messages(*, prompt: str, context: str, question: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": PROMPTS[prompt]},
        {"role": "user", "content": f"Memory:\n{context}\n\nQuestion: {question}\n{INSTRUCTION}"},
    ]


def answer(client: Any, *, question: str, context: str, prompt: str = "state") -> AnswerResult:
    """One call; an empty answer with ``error`` set when the model failed (never raises)."""
    result = client.chat_text(messages=answer_messages(prompt=prompt, context=context,
                                                       question=question), max_tokens=64)
    return AnswerResult(
        answer=(result.data or "").strip() if result.ok else "", context=context,
        context_chars=len(context), chat_calls=1, prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens, error=result.error,
    )


def iterative_answer(client: Any, *, namespace: Any, question: str, k: int = 12,
                     disclose: tuple[str, ...] = ()) -> AnswerResult:
    """Frontier top-k, then up to three lookups of six new cells each, then an answer."""
    from memory.selectors import FRONTIER_HEADER, frontier_read

    first = frontier_read(namespace=namespace, query=question, k=k, disclose=disclose)
    lines = [item["line"] for item in first.items]
    seen = {item["key"] for item in first.items}
    out = AnswerResult(answer="", context=first.context, context_chars=first.context_chars)
    for _ in range(MAX_LOOKUPS):
        context = "\n".join([FRONTIER_HEADER, *lines])
        reply = client.chat_json(
            messages=[{"role": "system", "content": LOOKUP_SYSTEM},
                      {"role": "user", "content": f"Memory:\n{context}\n\nQuestion: {question}"}],
            schema=LOOKUP_SCHEMA, schema_name="pmem_readout")
        out.chat_calls += 1
        out.prompt_tokens += reply.prompt_tokens
        out.completion_tokens += reply.completion_tokens
        data = reply.data if isinstance(reply.data, dict) else {}
        if data.get("action") == "answer" and str(data.get("answer", "")).strip():
            out.answer, out.context, out.context_chars = str(data["answer"]).strip(), context, len(context)
            return out
        if data.get("action") != "lookup":
            break  # malformed: force the answer now
        query = f"{data.get('entity', '')} {data.get('relation', '')}".strip() or question
        more = frontier_read(namespace=namespace, query=query, k=CELLS_PER_LOOKUP + len(seen),
                             disclose=disclose)
        fresh = [i for i in more.items if i["key"] not in seen][:CELLS_PER_LOOKUP]
        seen |= {i["key"] for i in fresh}
        lines += [i["line"] for i in fresh]
        out.lookups.append({"entity": str(data.get("entity", "")),
                            "relation": str(data.get("relation", "")), "found": str(len(fresh))})
    context = "\n".join([FRONTIER_HEADER, *lines])
    forced = answer(client, question=question, context=context, prompt="state")
    out.answer, out.context, out.context_chars = forced.answer, context, len(context)
    out.chat_calls += 1
    out.prompt_tokens += forced.prompt_tokens
    out.completion_tokens += forced.completion_tokens
    out.error = forced.error
    return out
