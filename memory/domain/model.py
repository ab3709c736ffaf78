"""Value objects of the provenance graph: operation requests, cell states, effects, decisions.
The names they use (statuses, operations) are in :mod:`memory.domain.vocabulary`."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from .vocabulary import OpType, Status, cell_status


class InvalidOperation(Exception):
    """An operation that is not defined in the cell's current state (SPEC §3 'invalid')."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class BadParameter(ValueError):
    """A reader's parameter that names something it cannot (a cursor of another key, a
    version of another cell, a search without a letter): ``field`` names the input, ``message``
    says why. The API answers 400 naming the field; the explorer, 400 naming the parameter."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


#: The largest id PostgreSQL's ``bigint`` holds: a larger one in a URL or a form names
#: nothing, and is refused before a query would fail on it.
BIGINT_MAX = 2**63 - 1


_WS = re.compile(r"\s+")
#: The longest canonical key the store holds (the key columns' length).
KEY_MAX_CHARS = 255
#: Unicode general categories whose characters a key keeps (SPEC §1): letters, marks, numbers.
_KEY_CATEGORIES = frozenset("LMN")
#: Memoise keys up to this length only: a hostile text can make long candidate keys, and the
#: cache must not hold megabytes of them.
_MEMO_MAX_CHARS = 512


def normalize_value(value: str) -> str:
    """Values compare after whitespace and case normalisation (SPEC §3)."""
    return _WS.sub(" ", unicodedata.normalize("NFKC", value)).strip().casefold()


def same_value(a: str, b: str) -> bool:
    return normalize_value(a) == normalize_value(b)


def normalize_key(key: str) -> str:
    """Canonical key form (SPEC §1): NFKC and case-folded; the letters, marks and numbers of
    every script kept (``電話 1`` -> ``電話_1``, ``कि`` and ``का`` stay apart); every run of
    anything else (spaces, punctuation, symbols, emoji) one ``_``, none at either end. ``""``
    when nothing is left: the caller refuses the key. One pass, linear in the key; memoised
    (a commit normalises each key several times, and keys repeat)."""
    if len(key) <= _MEMO_MAX_CHARS:
        return _normalize_key_memo(key)
    return _normalize_key(key)


@lru_cache(maxsize=1 << 16)
def _normalize_key_memo(key: str) -> str:
    return _normalize_key(key)


def _normalize_key(key: str) -> str:
    # NFKC again after case folding: folding can leave a string that is not in NFKC (a
    # decomposed sequence), and the canonical form must be a fixed point of this function.
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", key).casefold())
    if folded.isascii():  # the common case, without a category lookup per character
        return _ASCII_JUNK.sub("_", folded).strip("_")
    out: list[str] = []
    gap = False
    for ch in folded:
        if unicodedata.category(ch)[0] in _KEY_CATEGORIES:
            if gap and out:
                out.append("_")
            out.append(ch)
            gap = False
        else:
            gap = True
    return "".join(out)


# ASCII letters and digits are the ASCII characters of categories L and N (after folding, no
# upper case is left). One negated class, one quantifier: it cannot backtrack.
_ASCII_JUNK = re.compile(r"[^0-9a-z]+")


#: Placeholder id for the version an operation creates (it has no id until stored).
NEW = -1


@dataclass(frozen=True)
class VersionView:
    """What the state machine needs to know of one version."""

    id: int
    value: str
    status: Status
    supersedes_id: int | None = None


@dataclass(frozen=True)
class CellState:
    """A cell as the state machine sees it.

    ``predecessors`` is the head's ``supersedes`` chain, nearest first, as far as the first
    version that is neither revoked nor contradicted (that is all rollback can need).
    ``target`` is the version an operation names by id when it is not the head or an
    alternative (revoke of a closed version).
    """

    head: VersionView | None = None
    alternatives: tuple[VersionView, ...] = ()  # oldest first
    predecessors: tuple[VersionView, ...] = ()
    target: VersionView | None = None

    @property
    def state(self) -> str:
        return cell_status(self.head.status if self.head is not None else None)


@dataclass(frozen=True)
class OpRequest:
    op: OpType
    value: str | None = None
    version_id: int | None = None


# --- effects: what the store must do, in order -------------------------------------------


@dataclass(frozen=True)
class NewVersion:
    value: str
    status: Status
    supersedes_id: int | None = None
    alternative_of_id: int | None = None
    #: ``restore``: the revoked or contradicted version this one restores (a ``restores``
    #: edge); the new version carries that version's supporting evidence (SPEC §3).
    restores_id: int | None = None


@dataclass(frozen=True)
class Retype:
    """Set a version's status; the store closes or reopens its validity interval to match."""

    version_id: int
    status: Status


@dataclass(frozen=True)
class LinkSupersedes:
    """An existing version (a promoted alternative) supersedes the former head."""

    version_id: int
    supersedes_id: int


@dataclass(frozen=True)
class Support:
    version_id: int


@dataclass(frozen=True)
class Tombstone:
    version_id: int


@dataclass(frozen=True)
class Reinstate:
    """A retained predecessor becomes the head again; logged as its own operation."""

    version_id: int
    status: Status


Effect = NewVersion | Retype | LinkSupersedes | Support | Tombstone | Reinstate


@dataclass(frozen=True)
class Decision:
    """The result of one operation on one cell.

    ``applied`` is False when the operation acted as a noop (support only, or nothing).
    ``head_id`` is the head after the operation: a version id, :data:`NEW`, or None (empty).
    """

    op: OpType
    effects: tuple[Effect, ...]
    head_id: int | None
    applied: bool = True
    note: str = ""
