"""The unit that extraction produces and annotation consumes: one keyed fact."""

from __future__ import annotations

from dataclasses import dataclass

from memory.domain import ASSERTIONS, OBSERVATION_OPS

#: The typed operations of SPEC §3 an observation may carry, in the vocabulary the model
#: answers in (``restore`` is a person's, never an observation's).
OPS: tuple[str, ...] = tuple(op.value for op in OBSERVATION_OPS)


@dataclass(frozen=True)
class Fact:
    """One keyed fact extracted from an observation.

    ``key`` is canonical (``memory.domain.normalize_key``), ``value`` verbatim. ``assertion`` is
    one of :data:`ASSERTIONS`; ``withdrawn`` means the value was reported in error. ``op`` is an
    optional hint from a rule pattern (``contest``, ``resolve``, ...); None lets annotation decide.
    ``proposed``/``old_value``: the operation a model proposed for the fact as a patch on the
    head it was shown (``old_value``: that head's value, None when it was shown none), used
    only while that head is still the key's head (SPEC §5.4).
    """

    key: str
    value: str
    assertion: str = "asserted"
    op: str | None = None
    proposed: str | None = None
    old_value: str | None = None


def coerce_assertion(value: object) -> str:
    """An assertion from untrusted input: known values pass, anything else is ``asserted``."""
    text = str(value).strip().lower() if value is not None else ""
    return text if text in ASSERTIONS else "asserted"
