"""Every prompt and JSON schema P-Mem sends a model: the write path's three jobs (extraction,
annotation, key identity) and the reads' (answer, iterative readout, pruning).

Each write-path job is recognisable on the wire without parsing prose (the scripted test server
relies on this): JSON jobs by their ``response_format`` schema name, every job by the first line
of its system prompt, ``# <job name>``. Payloads sit between XML-like tags so they can be cut
out exactly: ``<observation>`` (extraction), ``<facts>`` JSON (annotation), ``<key_a>``/
``<key_b>`` (identity). The read prompts are the paper's (B.4), recognised by their text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from memory.domain import ASSERTIONS, Status

from .facts import OPS

EXTRACTION = "pmem_extraction"
ANNOTATION = "pmem_annotation"
IDENTITY = "pmem_identity"

_NULLABLE_STRING: dict[str, Any] = {"type": ["string", "null"]}

_FACT: dict[str, Any] = {
    "key": {"type": "string"},
    "value": {"type": "string"},
    "assertion": {"type": "string", "enum": list(ASSERTIONS)},
}


def _facts_schema(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "facts": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": properties,
                    "required": ["key", "value", "assertion"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["facts"],
        "additionalProperties": False,
    }


#: Extraction with no heads shown: facts only.
EXTRACTION_SCHEMA: dict[str, Any] = _facts_schema(_FACT)
#: Extraction shown heads: each fact may also carry the patch it makes on its key's head. Op
#: and old value are asked for, not required: a weak model under a grammar that forces them
#: runs on far longer, and a fact without them is annotated. Not offered when no head is
#: shown: there is nothing to patch, and a grammar that allows them lets a small model run on
#: in them to its token limit.
EXTRACTION_PATCH_SCHEMA: dict[str, Any] = _facts_schema(
    {**_FACT, "op": {"type": "string", "enum": list(OPS)}, "old_value": _NULLABLE_STRING})


def extraction_schema(memory: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """The schema of an extraction shown ``memory`` (see :func:`extraction_messages`)."""
    return EXTRACTION_PATCH_SCHEMA if memory else EXTRACTION_SCHEMA


ANNOTATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "operations": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "op": {"type": "string", "enum": list(OPS)},
                    "key": {"type": "string"},
                    "old_value": _NULLABLE_STRING,
                    "new_value": _NULLABLE_STRING,
                    "status": {
                        "type": "string",
                        "enum": [*(status.value for status in Status), "unchanged"],
                    },
                    "supersedes": {"type": "boolean"},
                },
                "required": ["op", "key", "old_value", "new_value", "status", "supersedes"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["operations"],
    "additionalProperties": False,
}

EXTRACTION_SYSTEM = f"""# {EXTRACTION}
You turn one observation into keyed facts for an agent's memory.
Answer with JSON: {{"facts": [{{"key": ..., "value": ..., "assertion": ...}}]}}.

Rules:
- key: a value-independent snake_case identifier naming a subject and an attribute, e.g.
  personal_best_5k_time (never personal_best_27_12), mug_1_location, alice_home_city.
  The same attribute of the same subject must always get the same key, whatever its value.
- value: copied verbatim from the observation; do not paraphrase, convert or complete it.
- assertion: "asserted" (stated as fact), "hedged" (uncertain: maybe, I think, probably),
  "reported" (someone else says so), "withdrawn" (the text says this value was wrong or
  reported in error; give the value that was withdrawn).
- Keep the order of the observation. Do not deduplicate: if one attribute changes twice,
  emit both facts in order.
- Emit only facts the observation states. No facts: {{"facts": []}}.
"""

ANNOTATION_SYSTEM = f"""# {ANNOTATION}
You maintain an agent's memory: one current value (the head) per key. For each incoming fact,
choose ONE typed operation relative to the key's head. Facts arrive in order: an incoming fact
is newer than the head it is compared with.

Operations:
- accept: the fact's value becomes the head; the old head is kept as superseded (outdated, not
  wrong). Use it for a new key (no head) and for ordinary updates and moves.
- reject: the fact's value becomes the head and the old head is recorded as contradicted (it was
  wrong, not merely outdated).
- contest: the fact challenges the head without settling it (hedged or conflicting reports);
  the head stays, marked contested, and the value is kept as an alternative. Needs a head.
- revoke: a retraction. A fact with assertion "withdrawn" names a value that was reported in
  error: revoke when that value is the head or one of its alternatives, otherwise noop.
- resolve: settle a contested key in favour of the fact's value (the head or an alternative).
  Only valid when the head's status is contested.
- noop: nothing changes; the fact merely repeats the head (it counts as support).

Answer with JSON {{"operations": [...]}}, exactly one operation per fact, in the given order,
each {{"op", "key" (copied exactly), "old_value" (the head value or null), "new_value" (the
fact's value or null), "status" (the status the fact's value ends with: active, contested,
alternative, revoked, or unchanged for noop), "supersedes" (true when the new value replaces the
head)}}. A fact with "hard_commit": true is a structured correction: do not answer noop for it
unless its value equals the head. "suggested_op", when present, is a rule's hint; follow it
unless it is impossible in the key's state.
"""

IDENTITY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answers": {"type": "array",
                    "items": {"type": "string", "enum": ["same", "different"]}},
    },
    "required": ["answers"],
    "additionalProperties": False,
}

IDENTITY_SYSTEM = f"""# {IDENTITY}
You decide whether two memory keys name the same attribute of the same subject.
You see only the key names. Answer with exactly one word: same or different (for several
pairs, one such word per pair, as asked).
"""


#: Added to the extraction prompt only when heads are shown: without any, there is nothing
#: to patch (a weak model told of ops it cannot use repeats itself until the token limit).
EXTRACTION_PATCHES = """
Each fact is also a change to the agent's memory. <memory> lists what it holds now for keys
this observation may touch (key, value, status). When a fact is about one of those attributes,
use that key, set "old_value" to its value and "op" to: "noop" when the fact repeats that value;
"accept" for an ordinary update (the old value is outdated); "reject" when the text says the
old value was wrong; "contest" when the fact is hedged or conflicts without settling it;
"revoke" for a withdrawn value; "resolve" to settle a contested key on one of its values. A
fact about any other attribute: "op" "accept", "old_value" null.
"""

EXTRACTION_USER = "Extract the facts from this observation."


def extraction_messages(text: str, memory: Sequence[dict[str, Any]] = ()) -> list[dict[str, str]]:
    """``memory``: the heads shown (``key``, ``value``, ``status``, and ``alternatives`` of a
    contested one), one JSON object per line between ``<memory>`` tags."""
    if not memory:
        user = f"{EXTRACTION_USER}\n<observation>\n{text}\n</observation>"
        return [{"role": "system", "content": EXTRACTION_SYSTEM},
                {"role": "user", "content": user}]
    shown = "\n".join(json.dumps(head, ensure_ascii=False) for head in memory)
    user = (f"{EXTRACTION_USER}\n<memory>\n{shown}\n</memory>\n"
            f"<observation>\n{text}\n</observation>")
    return [{"role": "system", "content": EXTRACTION_SYSTEM + EXTRACTION_PATCHES},
            {"role": "user", "content": user}]


def annotation_messages(facts: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    """``facts`` are JSON-ready dicts (see ``annotation.item_payload``)."""
    payload = json.dumps({"facts": list(facts)}, ensure_ascii=False, indent=1)
    user = f"Choose one operation per fact.\n<facts>\n{payload}\n</facts>"
    return [{"role": "system", "content": ANNOTATION_SYSTEM}, {"role": "user", "content": user}]


def identity_messages(candidate_key: str, existing_key: str) -> list[dict[str, str]]:
    user = (
        f"<key_a>{candidate_key}</key_a>\n<key_b>{existing_key}</key_b>\n"
        "Do these two keys name the same attribute? Answer same or different."
    )
    return [{"role": "system", "content": IDENTITY_SYSTEM}, {"role": "user", "content": user}]


def identity_batch_messages(pairs: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    """Several pairs in one call, still shown only the key names: one answer per pair."""
    payload = json.dumps([{"a": a, "b": b} for a, b in pairs], ensure_ascii=False)
    user = (f"<pairs>\n{payload}\n</pairs>\nFor each pair in order: do keys a and b name the "
            'same attribute? Answer with JSON {"answers": ["same" or "different", ...]}.')
    return [{"role": "system", "content": IDENTITY_SYSTEM}, {"role": "user", "content": user}]


# --- reads: the answer step, iterative readout, pruning ---------------------------------------

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
ANSWER_INSTRUCTION = "Answer with the answer only (a few words), no explanation."
#: The answer prompts by name: "state" for materialized cells, "flat" for evidence reads.
ANSWER_PROMPTS = {"flat": FLAT_SYSTEM, "state": STATE_SYSTEM}

READOUT = "pmem_readout"
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

PRUNE_PROMPT = (
    "You check two memory snippets for one question. Answer with one word, yes or no.\n"
    "Question: {query}\nSnippet A: {a}\nSnippet B: {b}\n"
    "Do A and B state different values of the attribute the question asks about?"
)
GATE_PROMPT = (
    "Answer with one word, yes or no. Does this question ask for the current value of "
    "something that may have changed over time?\nQuestion: {query}"
)


def answer_messages(*, prompt: str, context: str, question: str) -> list[dict[str, str]]:
    user = f"Memory:\n{context}\n\nQuestion: {question}\n{ANSWER_INSTRUCTION}"
    return [{"role": "system", "content": ANSWER_PROMPTS[prompt]},
            {"role": "user", "content": user}]


def lookup_messages(*, context: str, question: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": LOOKUP_SYSTEM},
            {"role": "user", "content": f"Memory:\n{context}\n\nQuestion: {question}"}]
