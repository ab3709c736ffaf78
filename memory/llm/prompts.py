"""Prompts and JSON schemas for the three model jobs: extraction, annotation, key identity.

Each job is recognisable on the wire without parsing prose (the scripted test server relies on
this): JSON jobs by their ``response_format`` schema name, every job by the first line of its
system prompt, ``# <job name>``. Payloads sit between XML-like tags so they can be cut out
exactly: ``<observation>`` (extraction), ``<facts>`` JSON (annotation), ``<key_a>``/``<key_b>``
(identity).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .facts import ASSERTIONS, OPS

EXTRACTION = "pmem_extraction"
ANNOTATION = "pmem_annotation"
IDENTITY = "pmem_identity"

_NULLABLE_STRING: dict[str, Any] = {"type": ["string", "null"]}

EXTRACTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "key": {"type": "string"},
                    "value": {"type": "string"},
                    "assertion": {"type": "string", "enum": list(ASSERTIONS)},
                },
                "required": ["key", "value", "assertion"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["facts"],
    "additionalProperties": False,
}

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
                        "enum": [
                            "active",
                            "contested",
                            "alternative",
                            "superseded",
                            "contradicted",
                            "revoked",
                            "unchanged",
                        ],
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

IDENTITY_SYSTEM = f"""# {IDENTITY}
You decide whether two memory keys name the same attribute of the same subject.
You see only the key names. Answer with exactly one word: same or different.
"""


EXTRACTION_USER = "Extract the facts from this observation."


def extraction_messages(text: str) -> list[dict[str, str]]:
    user = f"{EXTRACTION_USER}\n<observation>\n{text}\n</observation>"
    return [{"role": "system", "content": EXTRACTION_SYSTEM}, {"role": "user", "content": user}]


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
