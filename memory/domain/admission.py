"""What the service admits (SPEC §11.2, CONTRACT "Input that is refused"): ONE set of limits
and checks, called by the API on every observation it is sent and by the importer on every
record of a file, so that what one refuses the other refuses and what one accepts the other
restores. Pure Python: the limits are given (the site's settings make them,
:func:`memory.services.admission.limits`), and anything that records facts — a batch, a
conversation's messages — calls the same functions.

Each check raises :class:`Refused` naming the field (``facts[3].metadata``) and why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .metadata import MetadataRefused, clean_metadata
from .model import KEY_MAX_CHARS, normalize_key
from .scopes import MAX_SOURCE_CHARS, source_problem

#: JSON escapes a control character as six bytes (``\u0000``): the most one character of a
#: string takes in an export line (PostgreSQL writes every other one as UTF-8, ≤ 4 bytes).
BYTES_PER_CHAR = 6
#: What a line holds beside its strings: field names, numbers, times (generous).
LINE_OVERHEAD = 64 * 1024
#: A fact's members besides key, value, reason and metadata (op, version, flags), in chars.
FACT_OVERHEAD = 256
#: The stored extraction may carry the model's raw answer beside the facts.
RAW_OUTPUT_CHARS = 1_000_000


class Refused(ValueError):
    """Input the service does not admit: ``field`` (a path, ``facts[2].value``) and why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


@dataclass(frozen=True)
class Limits:
    """The limits of what one observation and one fact may hold (the API's, the importer's)."""

    text_chars: int = 100_000
    value_chars: int = 10_000
    key_chars: int = 200  # as sent; once normalised, at most KEY_MAX_CHARS
    facts: int = 500
    reason_chars: int = 2000
    idempotency_chars: int = 200
    source_chars: int = MAX_SOURCE_CHARS

    def fact_chars(self) -> int:
        return (self.key_chars + self.value_chars + self.reason_chars + FACT_OVERHEAD
                + 4096)  # metadata: at most 4 kB of JSON (memory.domain.metadata)

    def line_bytes(self) -> int:
        """The longest export line a namespace the API produced can hold: an observation with
        the longest text, the most facts (stored twice: as sent and as extracted) and a model's
        raw answer, every character at its longest escape. An import refuses a longer line."""
        chars = (self.text_chars + 2 * self.facts * self.fact_chars() + RAW_OUTPUT_CHARS
                 + 4 * self.source_chars)
        return chars * BYTES_PER_CHAR + LINE_OVERHEAD


def _string(value: Any, field: str, most: int, *, null: bool = False) -> str | None:
    if value is None and null:
        return None
    if not isinstance(value, str):
        raise Refused(field, "must be a string")
    if len(value) > most:
        raise Refused(field, f"at most {most} characters ({len(value)} given)")
    if "\x00" in value:  # PostgreSQL text cannot hold U+0000
        raise Refused(field, "must not hold a NUL character")
    return value


def check_text(text: Any, limits: Limits, field: str = "text") -> str:
    return _string(text, field, limits.text_chars) or ""


def check_value(value: Any, limits: Limits, field: str = "value", *,
                null: bool = True) -> str | None:
    return _string(value, field, limits.value_chars, null=null)


def check_key(key: Any, limits: Limits, field: str = "key", *, canonical: bool = False) -> str:
    """A key as sent (or, ``canonical``, as stored: already normalised)."""
    key = _string(key, field, limits.key_chars) or ""
    name = normalize_key(key)
    if not name:
        raise Refused(field, "the key has no letters, marks or digits (of any script)")
    if len(name) > KEY_MAX_CHARS:
        raise Refused(field, f"the key is over {KEY_MAX_CHARS} characters once normalised")
    if canonical and name != key:
        raise Refused(field, f"a stored key is canonical ({name!r}, not {key!r})")
    return key


def check_source(source: Any, limits: Limits, field: str = "source") -> str:
    source = _string(source, field, limits.source_chars) or ""
    problem = source_problem(source)
    if problem:
        raise Refused(field, problem)
    return source


def check_metadata(value: Any, field: str = "metadata") -> Any:
    if value is None:
        return None
    try:
        return clean_metadata(value)
    except MetadataRefused as refused:
        raise Refused(field, str(refused)) from None


def check_fact(fact: Any, limits: Limits, field: str = "fact") -> Mapping[str, Any]:
    """One fact as the API stores it: a key, a value (or none, for a retraction), an optional
    reason, metadata and version; anything else it carries (op, flags) is small."""
    if not isinstance(fact, Mapping):
        raise Refused(field, "must be an object")
    check_key(fact.get("key"), limits, f"{field}.key")
    check_value(fact.get("value"), limits, f"{field}.value")
    if fact.get("reason") is not None:
        _string(fact["reason"], f"{field}.reason", limits.reason_chars)
    check_metadata(fact.get("metadata"), f"{field}.metadata")
    version = fact.get("version")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int | str)):
        raise Refused(f"{field}.version", "must be an integer or an ordinal")
    return fact


def check_facts(facts: Any, limits: Limits, field: str = "facts") -> list[Any]:
    """An observation's facts, however they arose (sent, rule- or model-extracted): at most
    ``limits.facts``, each one admitted."""
    if facts is None:
        return []
    if not isinstance(facts, list):
        raise Refused(field, "must be a list of facts")
    if len(facts) > limits.facts:
        raise Refused(field, f"at most {limits.facts} facts in one observation"
                             f" ({len(facts)} given)")
    for i, fact in enumerate(facts):
        check_fact(fact, limits, f"{field}[{i}]")
    return facts


def check_observation(*, text: Any, facts: Any, source: Any, limits: Limits,
                      idempotency_key: Any = None) -> None:
    """Everything an observation brings, as the API takes it and as an export carries it."""
    check_text(text, limits)
    check_facts(facts, limits)
    check_source(source, limits)
    if idempotency_key is not None:
        _string(idempotency_key, "idempotency_key", limits.idempotency_chars)
