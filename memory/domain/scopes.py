"""What an API token may do: its scope (CONTRACT "Tokens and roles").

Scopes are ordered; each includes the ones below it:

- ``read``: reads, cells, graphs, the operation log, observation status.
- ``write``: adds observations, explicit-op facts included (an agent correcting itself).
- ``review``: adds the human operations on a cell (the cell-operations endpoint) and erase.

The HTTP API (``memory.api.permissions``) and any other front door to memory (the MCP
server) decide with :func:`scope_allows` / :func:`require_scope`, so one table says what a
scope is worth everywhere. Pure Python: no Django import.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from datetime import datetime
from enum import StrEnum

from confusable_homoglyphs import confusables


class Scope(StrEnum):
    READ = "read"
    WRITE = "write"
    REVIEW = "review"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {Scope.READ: 0, Scope.WRITE: 1, Scope.REVIEW: 2}

#: The scope of tokens made before scopes existed, of ``pmem_namespace create`` and of the
#: demo token: everything in the namespace, as before.
LEGACY_SCOPE = Scope.REVIEW
#: The scope ``pmem_token create`` and the explorer offer first: observe and read.
DEFAULT_SCOPE = Scope.WRITE

#: The scope each MCP tool of CONTRACT needs, so the MCP server applies the API's scopes to
#: its tools: ``retract``, ``contest`` and ``resolve`` are recorded as observations carrying
#: one fact with that explicit op, which needs ``write`` like any observation.
MCP_TOOL_SCOPES = {
    "remember": Scope.WRITE, "retract": Scope.WRITE, "contest": Scope.WRITE,
    "resolve": Scope.WRITE, "recall": Scope.READ, "get_fact": Scope.READ,
    "fact_history": Scope.READ, "observation_status": Scope.READ,
}


class ScopeDenied(Exception):
    """A token asked for something its scope does not cover (HTTP 403)."""

    def __init__(self, held: Scope, needed: Scope) -> None:
        self.held, self.needed = held, needed
        super().__init__(f"this token's scope is {held.value}; this needs scope {needed.value}")


def scope_allows(held: Scope | str, needed: Scope | str) -> bool:
    """Whether a token of scope ``held`` may do what needs ``needed``."""
    return Scope(held).rank >= Scope(needed).rank


def require_scope(held: Scope | str, needed: Scope | str) -> None:
    """Raise :class:`ScopeDenied` unless ``held`` covers ``needed``."""
    if not scope_allows(held, needed):
        raise ScopeDenied(Scope(held), Scope(needed))


def token_refusal(*, revoked_at: datetime | None, expires_at: datetime | None,
                  now: datetime) -> str | None:
    """Why a stored token may not be used at ``now`` ("token revoked", "token expired"), or
    None when it may."""
    if revoked_at is not None:
        return "token revoked"
    if expires_at is not None and expires_at <= now:
        return "token expired"
    return None


# --- the sources a token may claim (SPEC §8) ---------------------------------------------------

#: The most sources one token may be bound to, and the longest name of one (Evidence.source).
MAX_BOUND_SOURCES = 32
MAX_SOURCE_CHARS = 200


class SourceRefused(Exception):
    """A write token named a source it may not claim (HTTP 403; nothing is stored)."""

    def __init__(self, source: str, bound: tuple[str, ...]) -> None:
        self.source, self.bound = source, bound
        allowed = (f"the sources it is bound to ({', '.join(bound)}) or " if bound else "")
        super().__init__(f"this token may not name source {source!r}: it has a trust level; "
                         f"a write token names {allowed}sources without one")


#: Default-ignorable characters outside category Cf (combining grapheme joiner, Hangul fillers,
#: Khmer inherent vowels, Mongolian variation selectors, variation selectors).
_IGNORABLE = frozenset([0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0,
                        *range(0x180B, 0x1810), *range(0xFE00, 0xFE10),
                        *range(0xE0100, 0xE01F0)])


def _invisible(ch: str) -> bool:
    return unicodedata.category(ch) == "Cf" or ord(ch) in _IGNORABLE


def source_fold(name: str) -> str:
    """The form two source names are compared in: NFKC, case-folded, invisible characters
    removed, so ``PAYROLL``, ``pay\u00adroll`` and full-width ``ｐａｙｒｏｌｌ`` are ``payroll``."""
    visible = "".join(ch for ch in name if not _invisible(ch))
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", visible).casefold()).strip()


def source_problem(name: str) -> str | None:
    """Why ``name`` cannot name a source, or None: it mixes scripts with characters that look
    like another script's (``pаyroll`` with a Cyrillic ``а``), so it would read as a name it
    is not."""
    folded = source_fold(name)
    if folded and not folded.isascii() and confusables.is_dangerous(folded):
        return ("the name mixes scripts with look-alike characters (it would read as"
                " another name): write it in one script")
    return None


def source_refusal(*, scope: Scope | str, bound: Iterable[str], source: str,
                   trusted: bool) -> SourceRefused | None:
    """Why a token of ``scope`` bound to ``bound`` may not name ``source`` (``trusted``: the
    namespace gives it a trust level), or None when it may.

    A source's trust is only as good as the right to claim it: a ``review`` token (a person's
    delegate, trusted with erase already) names any; a ``write`` token its bound sources, and
    any source nobody gave a trust level — those carry no weight to borrow."""
    bound = tuple(bound)
    if scope_allows(scope, Scope.REVIEW) or not trusted or source_fold(source) in {
            source_fold(b) for b in bound}:
        return None
    return SourceRefused(source, bound)


def default_source(bound: Iterable[str]) -> str | None:
    """The source a write names when it names none: the token's, when it is bound to one."""
    bound = tuple(bound)
    return bound[0] if len(bound) == 1 else None


def clean_sources(names: Iterable[str]) -> list[str]:
    """A binding as stored: each name stripped, empty ones dropped, duplicates once, in the
    order given. Raises ValueError past ``MAX_BOUND_SOURCES`` or ``MAX_SOURCE_CHARS``."""
    out: list[str] = []
    for name in names:
        name = name.strip()
        if not name or name in out:
            continue
        if len(name) > MAX_SOURCE_CHARS or not name.isprintable():
            raise ValueError(f"a source name is at most {MAX_SOURCE_CHARS} printable characters")
        problem = source_problem(name)
        if problem:
            raise ValueError(f"source {name!r}: {problem}")
        out.append(name)
    if len(out) > MAX_BOUND_SOURCES:
        raise ValueError(f"a token is bound to at most {MAX_BOUND_SOURCES} sources")
    return out
