"""Soft key identity's deterministic pre-check (SPEC §5.3, docs/identity.md): the pairs of key
names a rule can decide, so that only the others are shown to the model.

- Names equal after normalisation (SPEC §1) are the same key.
- Names that both carry identifier tokens — a number (``mug_1``, ``order_8812``, ``5k``), a
  word with a digit in it (``k3f2a9c01b7e``), a long hex run (a uuid's parts) — and whose
  identifier tokens differ name different entities' attributes: different keys.
- Every other pair is a question for the model (``None``).

Why the identifier rule holds: an id names *which* entity; two names with different ids are
two entities' attributes however alike their words, and a semantic embedder places them close
(the words agree, the ids are noise to it), so without the rule nearly every new id-keyed name
would cost a model call that can only answer ``different``. A name with ids beside one
without (``order_8812_status``, ``order_status``) is left to the model: the id-less one may
well mean the same entity. The rule never merges two different names, so a mistake by it is a
fork (recoverable), never a wrong merge.
"""

from __future__ import annotations

import re
from collections import Counter

from .model import normalize_key

#: A hex run this long is an identifier even without a digit (``deadbeef``, a uuid's
#: letters-only group); English words made only of a-f letters are shorter.
_HEX_MIN = 8
_HEX = re.compile(r"^[0-9a-f]+$")


def is_identifier(token: str) -> bool:
    """Does this token of a normalised key name an entity rather than an attribute: a
    number, a word with a digit in it, or a hex run of at least ``_HEX_MIN`` characters?"""
    if any(ch.isdigit() for ch in token):
        return True
    return len(token) >= _HEX_MIN and _HEX.match(token) is not None


def identifier_tokens(key: str) -> Counter[str]:
    """The identifier tokens of a key's normalised name, with their counts."""
    return Counter(t for t in normalize_key(key).split("_") if t and is_identifier(t))


def same_by_rule(candidate: str, existing: str) -> bool | None:
    """True: the same key (equal once normalised); False: different (both carry identifier
    tokens and those differ); None: the rule cannot tell — ask the model."""
    a, b = normalize_key(candidate), normalize_key(existing)
    if a == b:
        return True
    ids_a, ids_b = identifier_tokens(a), identifier_tokens(b)
    if ids_a and ids_b and ids_a != ids_b:
        return False
    return None


def rule_reason(candidate: str, existing: str) -> str:
    """Why the rule decided a pair, as an operation's record says it."""
    if same_by_rule(candidate, existing):
        return f"identity by rule: {candidate!r} is {existing!r} once normalised"
    return (f"identity by rule: {candidate!r} and {existing!r} name different entities"
            " (their identifier tokens differ)")
