"""Soft key identity: one model call per observation, shown ONLY key names (SPEC §5.3): one
word for one pair, one word per pair for several.

Values are never shown: equal values recur across distinct keys, and showing them collapses the
merge decision (paper §3.3). Embedding the candidate key and gating on cosine is the caller's job.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from . import prompts
from .client import ModelClient, note_failure
from .errors import ModelError, unparsable, wrong_schema

_ANSWER = re.compile(r"^\W*(same|different)\W*$", re.IGNORECASE)


@dataclass(frozen=True)
class IdentityResult:
    """``same`` is True/False for a clear one-word answer, None otherwise (callers treat None
    as different: a fork is recoverable, a wrong merge silently overwrites another key)."""

    same: bool | None
    raw: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failure: ModelError | None = None


def parse_same_different(raw: str) -> bool | None:
    """'same' -> True, 'different' -> False (any case, surrounding punctuation and whitespace
    tolerated); anything else -> None."""
    found = _ANSWER.match(raw.strip())
    if found is None:
        return None
    return found.group(1).lower() == "same"


def confirm_same_key(client: ModelClient, candidate_key: str, existing_key: str) -> IdentityResult:
    """Ask whether ``candidate_key`` names the same attribute as ``existing_key``. Never raises
    on model or network faults (then ``same`` is None and ``error`` is set)."""
    result = client.chat_text(messages=prompts.identity_messages(candidate_key, existing_key),
                              kind="identity")
    same = parse_same_different(result.raw) if result.failure is None else None
    failure = result.failure
    if failure is None and same is None:
        failure = unparsable(repr(result.raw[:80]))
        note_failure("identity", failure)
    return IdentityResult(
        same=same,
        raw=result.raw,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        failure=failure,
    )


def confirm_same_keys(client: ModelClient,
                      pairs: Sequence[tuple[str, str]]) -> tuple[list[bool | None], IdentityResult]:
    """Ask about every ``(candidate, existing)`` pair of one observation in ONE call (a
    single pair: :func:`confirm_same_key`'s one-word form). Returns one verdict per pair —
    None for a missing or unclear answer, read as different — and the call's raw answer,
    tokens and failure. Never raises on model or network faults."""
    if len(pairs) == 1:
        one = confirm_same_key(client, *pairs[0])
        return [one.same], one
    result = client.chat_json(messages=prompts.identity_batch_messages(pairs),
                              schema=prompts.IDENTITY_SCHEMA, schema_name=prompts.IDENTITY,
                              kind="identity")
    answers = result.data.get("answers") if isinstance(result.data, dict) else result.data
    failure = result.failure
    if failure is None and not isinstance(answers, list):
        failure = wrong_schema("no list of answers")
        note_failure("identity", failure)
    words = answers if failure is None and isinstance(answers, list) else []
    verdicts = [parse_same_different(str(words[i])) if i < len(words) else None
                for i in range(len(pairs))]
    return verdicts, IdentityResult(same=None, raw=result.raw,
                                    prompt_tokens=result.prompt_tokens,
                                    completion_tokens=result.completion_tokens, failure=failure)
