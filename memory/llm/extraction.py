"""Extraction: one observation -> keyed facts. The model in ONE schema-constrained call
(paper A.4) when one is configured, else the rule extractor (:func:`extract_text`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any

from django.core.signals import setting_changed

from memory.domain import normalize_key

from . import prompts
from .client import ModelClient, client_from_settings
from .embedding import embedder_from_settings
from .facts import Fact, coerce_assertion
from .rules import RuleExtractor, patterns_from_settings

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


# --- text to facts: the model when configured, else the rule extractor ------------------------


@dataclass
class TextExtraction:
    facts: list[dict[str, Any]]
    extractor: str
    raw: str = ""
    error: str | None = None
    chat_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


def _fact_dict(fact: Fact) -> dict[str, Any]:
    # A rule pattern's op is a hint for annotation, not an operation a client asked for.
    return {"key": fact.key, "value": fact.value, "op": None, "hint": fact.op, "version": None,
            "hard_commit": False, "assertion": fact.assertion}


_rule_extractor: RuleExtractor | None = None


def rule_extractor() -> RuleExtractor:
    """The process's rule extractor, built once from ``PMEM_RULE_PATTERNS``."""
    global _rule_extractor
    if _rule_extractor is None:
        _rule_extractor = RuleExtractor(patterns_from_settings())
    return _rule_extractor


def _forget_rule_extractor(*, setting: str, **_: Any) -> None:
    # Built once per process; a test's settings change must rebuild it.
    global _rule_extractor
    if setting == "PMEM_RULE_PATTERNS":
        _rule_extractor = None


setting_changed.connect(_forget_rule_extractor)


def runs_locally() -> bool:
    """No chat model and a cheap embedder: extraction, planning and the vectors are pure
    CPU, so a drain may do them inside its commit transaction (and group observations)."""
    return client_from_settings() is None and bool(getattr(embedder_from_settings(), "cheap",
                                                           False))


def extract_text(text: str) -> TextExtraction:
    """Facts from free text: the model when configured (one call), else the rule extractor."""
    client = client_from_settings()
    if client is None:
        return TextExtraction([_fact_dict(f) for f in rule_extractor().extract(text)], "rules")
    result = extract_facts(client, text)
    return TextExtraction(
        [_fact_dict(f) for f in result.facts], "model", raw=result.raw, error=result.error,
        chat_calls=1, prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
    )
