"""Model extraction: one observation -> keyed facts, in ONE schema-constrained call (paper A.4)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any

from memory.domain import normalize_key

from . import prompts
from .client import ModelClient
from .facts import Fact, coerce_assertion

log = logging.getLogger("pmem.llm")


@dataclass(frozen=True)
class ExtractionResult:
    """Facts in observation order (possibly empty), the model's raw answer, tokens, and an error
    when the call failed or the answer was not a list of facts (then ``facts`` is empty)."""

    facts: list[Fact] = field(default_factory=list)
    raw: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None


def extract_facts(client: ModelClient, text: str) -> ExtractionResult:
    """Extract ``{key, value, assertion}`` facts from ``text``. Never raises on model
    misbehaviour: keys are normalised, facts with an empty key or value dropped, an unknown
    assertion read as ``asserted``; an answer without a list of facts is an error."""
    if not text.strip():
        return ExtractionResult()
    result = client.chat_json(
        messages=prompts.extraction_messages(text),
        schema=prompts.EXTRACTION_SCHEMA,
        schema_name=prompts.EXTRACTION,
    )
    answered = ExtractionResult(
        raw=result.raw,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        error=result.error,
    )
    if result.error is not None:
        return answered
    items = _fact_items(result.data)
    if items is None:
        log.warning("extraction answer has no list of facts: %.200s", result.raw)
        return replace(answered, error="wrong schema: no list of facts")
    return replace(answered, facts=[f for item in items if (f := _to_fact(item)) is not None])


def _fact_items(data: Any) -> list[Any] | None:
    """The list of fact objects: ``{"facts": [...]}``, or a bare list (the paper's form)."""
    if isinstance(data, dict):
        data = data.get("facts")
    return data if isinstance(data, list) else None


def _to_fact(item: Any) -> Fact | None:
    if not isinstance(item, dict):
        return None
    key = normalize_key(_text(item.get("key")))
    value = _text(item.get("value")).strip()
    if not key or not value:
        return None
    return Fact(key=key, value=value, assertion=coerce_assertion(item.get("assertion")))


def _text(value: Any) -> str:
    """Strings pass; JSON numbers and booleans become their JSON text; anything else is ''."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return ""
