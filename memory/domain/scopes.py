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

from datetime import datetime
from enum import StrEnum


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
