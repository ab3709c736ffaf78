"""Model extraction: one observation -> keyed facts, in ONE schema-constrained call (paper A.4).

What a model extracted is validated before anything is written (:func:`validate_model_facts`,
a pure function): weak or quantized models answer with empty keys, sentences for keys, the
prompt's own words for values, and the same fact over and over. Each dropped fact is returned
with its reason, to be recorded on the observation beside the raw answer (docs/decisions.md,
"Garbage defence"). Facts a client sent never pass through here.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from django.core.signals import setting_changed

from memory.domain import normalize_key, normalize_value

from . import prompts
from .client import ModelClient, client_from_settings, note_failure
from .embedding import embeds_locally
from .errors import ModelError, wrong_schema
from .facts import OPS, Fact, coerce_assertion
from .rules import RuleExtractor, patterns_from_settings

log = logging.getLogger("pmem.llm")


@dataclass(frozen=True)
class ExtractionResult:
    """Facts in observation order (possibly empty), the model's raw answer, tokens, and a
    failure when the call failed or the answer was not a list of facts (then ``facts`` is
    empty)."""

    facts: list[Fact] = field(default_factory=list)
    raw: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failure: ModelError | None = None
    dropped: list[dict[str, str]] = field(default_factory=list)


def extract_facts(client: ModelClient, text: str,
                  memory: Sequence[dict[str, Any]] = ()) -> ExtractionResult:
    """Extract ``{key, value, assertion}`` facts from ``text``, each with the operation the
    model proposes against the heads ``memory`` shows it (``op``, ``old_value``). Never
    raises on model misbehaviour: keys are normalised, an unknown assertion read as
    ``asserted``, an unknown op as none proposed, and facts that fail
    :func:`validate_model_facts` dropped (listed in ``dropped``, with the reason); an answer
    without a list of facts is an error."""
    if not text.strip():
        return ExtractionResult()
    result = client.chat_json(
        messages=prompts.extraction_messages(text, memory),
        schema=prompts.extraction_schema(memory),
        schema_name=prompts.EXTRACTION,
        kind="extract",
    )
    answered = ExtractionResult(
        raw=result.raw,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        failure=result.failure,
    )
    if result.failure is not None:
        return answered
    items = _fact_items(result.data)
    if items is None:
        log.warning("extraction answer has no list of facts: %.200s", result.raw)
        failure = wrong_schema("no list of facts")
        note_failure("extract", failure)
        return replace(answered, failure=failure)
    facts, dropped = validate_model_facts(items, observation=text)
    if dropped:
        log.warning("extraction dropped %d of %d fact(s) (first: %s)", len(dropped), len(items),
                    dropped[0]["reason"])
    return replace(answered, facts=facts, dropped=dropped)


def _fact_items(data: Any) -> list[Any] | None:
    """The list of fact objects: ``{"facts": [...]}``, or a bare list (the paper's form)."""
    if isinstance(data, dict):
        data = data.get("facts")
    return data if isinstance(data, list) else None


# --- garbage defence -------------------------------------------------------------------------

#: Longest key a model may invent (a client may send up to ``PMEM_MAX_KEY_CHARS``): the
#: prompt asks for subject + attribute; longer is a sentence squeezed into snake_case.
MAX_MODEL_KEY_CHARS = 64
#: Most words (``_``-separated parts) in a model's key, for the same reason.
MAX_MODEL_KEY_WORDS = 8
#: Most drops listed on one observation (the raw answer beside them holds the rest).
MAX_DROPS_RECORDED = 50
#: A run of this many words shared with the prompt and absent from the observation is a copy.
_COPY_RUN = 4
#: The schema's own words: a key or value that is one of them is a placeholder, not a fact.
_PLACEHOLDERS = frozenset({"key", "value", "values", "assertion", "fact", "facts", "string",
                           "snake case", "identifier", "observation", "subject", "attribute",
                           "asserted", "hedged", "reported", "withdrawn", "null", "none",
                           "n a", "example", "text"})
_WORDS = re.compile(r"[^\W_]+")  # runs of letters and digits; never backtracks


def _words(text: str) -> list[str]:
    return _WORDS.findall(text.casefold())


def _runs(words: list[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


class _Instructions:
    """What the model was told (to recognise copies of it), and the observation it read."""

    def __init__(self, observation: str, instructions: Iterable[str]) -> None:
        told = _words(" ".join(instructions))
        seen = _words(observation)
        self.told_runs = _runs(told, _COPY_RUN)
        self.told_text = " ".join(told)
        self.seen = set(seen)
        self.seen_runs = _runs(seen, _COPY_RUN)

    def copied(self, text: str) -> bool:
        """True when ``text`` comes from the prompt rather than the observation: a run of
        ``_COPY_RUN`` words of the prompt the observation lacks, or (a shorter text) a
        placeholder or a phrase of the prompt none of whose words the observation uses."""
        words = _words(text)
        if not words:
            return False
        if any(run in self.told_runs and run not in self.seen_runs
               for run in _runs(words, _COPY_RUN)):
            return True
        if self.seen.intersection(words):
            return False
        phrase = " ".join(words)
        return phrase in _PLACEHOLDERS or f" {phrase} " in f" {self.told_text} "


def validate_model_facts(items: Iterable[Any], *, observation: str,
                         instructions: Iterable[str] | None = None,
                         ) -> tuple[list[Fact], list[dict[str, str]]]:
    """Split a model's extracted items into facts to write and drops (``{key, value,
    reason}``, raw as the model gave them, at most ``MAX_DROPS_RECORDED``). Dropped: an item
    that is no object, an empty key, a key with no letter or that is a sentence, a key over
    ``MAX_MODEL_KEY_CHARS``, an empty value, a key or value copying the instructions
    (``instructions`` default to the extraction prompt), and a repeat of a (key, value, assertion)
    already kept from this answer. Pure: no I/O."""
    told = _Instructions(observation, instructions if instructions is not None
                         else (prompts.EXTRACTION_SYSTEM, prompts.EXTRACTION_USER))
    facts: list[Fact] = []
    dropped: list[dict[str, str]] = []
    kept: set[tuple[str, str, str]] = set()
    for item in items:
        raw_key = _text(item.get("key")) if isinstance(item, dict) else ""
        raw_value = _text(item.get("value")).strip() if isinstance(item, dict) else ""
        key = normalize_key(raw_key)
        reason = _rejection(item, raw_key, key, raw_value, told)
        assertion = coerce_assertion(item.get("assertion")) if isinstance(item, dict) else ""
        # A withdrawal of a value just stated is no repeat of it: the assertion is part of it.
        pair = (key, normalize_value(raw_value), assertion)
        if reason is None and pair in kept:
            reason = "duplicate: the same key and value earlier in this answer"
        if reason is not None:
            if len(dropped) < MAX_DROPS_RECORDED:
                shown = raw_key if isinstance(item, dict) else repr(item)
                dropped.append({"key": shown[:200], "value": raw_value[:200], "reason": reason})
            continue
        kept.add(pair)
        proposed = str(item.get("op") or "").strip().lower()
        old = item.get("old_value")
        facts.append(Fact(key=key, value=raw_value, assertion=assertion,
                          proposed=proposed if proposed in OPS else None,
                          old_value=_text(old) if old is not None else None))
    return facts, dropped


def _rejection(item: Any, raw_key: str, key: str, value: str,
               told: _Instructions) -> str | None:
    """Why one item is not a fact to write, or None."""
    if not isinstance(item, dict):
        return "not a fact object"
    if not key:
        return "empty key"
    if not any(ch.isalpha() for ch in key):
        return "not a key: no letter in it"
    if "\n" in raw_key or len(key.split("_")) > MAX_MODEL_KEY_WORDS:
        return "not a key: a sentence"
    if len(key) > MAX_MODEL_KEY_CHARS:
        return f"key longer than {MAX_MODEL_KEY_CHARS} characters"
    if not value:
        return "empty value"
    if told.copied(key.replace("_", " ")):
        return "key copies the instructions"
    if told.copied(value):
        return "value copies the instructions"
    return None


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
    failure: ModelError | None = None
    chat_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    dropped: list[dict[str, str]] = field(default_factory=list)  # model facts refused
    shown: list[dict[str, Any]] = field(default_factory=list)  # the heads the model saw
    chunks: int = 1  # model calls a text past the model's context was cut into


def fact_dict(fact: Fact, origin: str) -> dict[str, Any]:
    # A rule pattern's op is a hint for annotation, not an operation a client asked for.
    # ``origin`` (rule, model) says who read the fact, so planning knows which facts the
    # model annotates (SPEC §5.4: only what it extracted itself).
    out: dict[str, Any] = {"key": fact.key, "value": fact.value, "op": None, "hint": fact.op, "version": None,
           "hard_commit": False, "assertion": fact.assertion, "origin": origin}
    if fact.proposed:  # the model's patch: planning uses it while its head still stands
        out["proposed"] = {"op": fact.proposed, "old_value": fact.old_value}
    return out


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
    """No chat model, and an embedder that leaves the commit free of embedding calls
    (:func:`memory.llm.embedding.embeds_locally`): extraction, planning and the vectors are
    pure CPU, so a drain may do them inside its commit transaction (and group observations)."""
    return client_from_settings() is None and embeds_locally()


#: What the model is shown of memory before it extracts: a callable, so that the heads are
#: looked up only when the model is asked at all.
Memory = Callable[[], list[dict[str, Any]]]


def extract_text(text: str, memory: Memory | None = None) -> TextExtraction:
    """Facts from free text: the rule extractor when no model is configured or when it
    understands all of the text (templated lines: SPEC §5.4, never sent to the model), else
    the model (one call), shown the heads ``memory`` gives so that it answers each fact as
    a patch (``proposed`` on the fact)."""
    client = client_from_settings()
    if client is None:
        return TextExtraction([fact_dict(f, "rule") for f in rule_extractor().extract(text)],
                              "rules")
    understood = rule_extractor().extract_whole(text)
    if understood is not None:
        return TextExtraction([fact_dict(f, "rule") for f in understood], "rules")
    shown = memory() if memory is not None else []
    result = extract_facts(client, text, shown)
    return TextExtraction(
        [fact_dict(f, "model") for f in result.facts], "model", raw=result.raw,
        failure=result.failure,
        chat_calls=1, prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens, dropped=result.dropped, shown=shown,
    )
