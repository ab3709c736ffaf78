"""The rollback walk rule (SPEC §4), stated once: how far back a retraction looks.

A retraction of the head reinstates its nearest predecessor that is neither revoked nor
contradicted, so the walk follows ``supersedes`` from the head and stops at the first version
that is not retracted. The state machine (:mod:`memory.domain.cells`), the in-memory graph,
the database overlay and the recursive SQL of the store all walk by these functions.
"""

from __future__ import annotations

from collections.abc import Callable

from .model import VersionView
from .vocabulary import RETRACTED_STATUSES, OpType


def walks_past(status: str) -> bool:
    """A rollback walks past a version with this status (it was recorded wrong or retracted)."""
    return status in RETRACTED_STATUSES


def retracts_head(op: OpType, value: str | None, version_id: int | None,
                  head_id: int | None) -> bool:
    """Whether the operation retracts the head (so the state machine needs its predecessors):
    a revoke of the head, or a reject without a replacement value."""
    if head_id is None:
        return False
    if op == OpType.REVOKE:
        return version_id is None or version_id == head_id
    return op == OpType.REJECT and not (value and value.strip())


def rollback_chain(first_id: int | None,
                   version: Callable[[int], VersionView]) -> tuple[VersionView, ...]:
    """The ``supersedes`` chain from ``first_id`` (the head's predecessor) backward, nearest
    first, as far as the first version a rollback may reinstate: all rollback can need.
    ``version`` looks a version up by id (the caller's store)."""
    chain: list[VersionView] = []
    cursor = first_id
    while cursor is not None:
        found = version(cursor)
        chain.append(found)
        if not walks_past(found.status):
            break
        cursor = found.supersedes_id
    return tuple(chain)
