"""The one interpreter of the state machine's effects.

:func:`interpret` applies a :class:`~memory.domain.model.Decision` to a store through the
small :class:`EffectSink` interface. Two stores implement it: the in-memory graph
(:mod:`memory.domain.memgraph`, the property tests' reference) and the overlay the PostgreSQL
writer works on (:mod:`memory.services.overlay`), so both apply effects by the same code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, TypeVar

from .model import (
    NEW,
    Decision,
    LinkSupersedes,
    NewVersion,
    Reinstate,
    Retype,
    Support,
    Tombstone,
)
from .vocabulary import OPEN_STATUSES, Status

T = TypeVar("T")


class EffectSink(Protocol):
    """One cell of a store, as the interpreter changes it."""

    def create(self, effect: NewVersion) -> int:
        """Store a new version (support 0) and return its id."""

    def retype(self, version_id: int, status: Status) -> None:
        """Set a version's status; its interval follows :func:`valid_to_after`."""

    def link_supersedes(self, version_id: int, supersedes_id: int) -> None: ...

    def support(self, version_id: int) -> None:
        """One more ``supported_by`` edge (and support count) for the version."""

    def carry_support(self, version_id: int, from_id: int) -> None:
        """``restore``: the version gets ``supported_by`` edges to the evidence that supports
        ``from_id`` (one per distinct evidence), and its support count grows by as many."""

    def tombstone(self, version_id: int) -> None: ...

    def move_head(self, version_id: int | None) -> None: ...


@dataclass(frozen=True)
class Outcome:
    """What applying one decision did, for the operation's log row."""

    head_after: int | None
    new_id: int | None
    supported: tuple[int, ...]  # versions given a support edge, the created one included
    tombstoned: tuple[int, ...]
    reinstated: tuple[tuple[int, Status], ...]
    version_ref: int | None  # the version the log row points at


def interpret(decision: Decision, sink: EffectSink) -> Outcome:
    """Apply ``decision``'s effects in order, then move the head. A created version is
    supported by the operation that created it (support counts edges, not sources)."""
    new_id: int | None = None
    supported: list[int] = []
    tombstoned: list[int] = []
    reinstated: list[tuple[int, Status]] = []
    for effect in decision.effects:
        if isinstance(effect, NewVersion):
            new_id = sink.create(effect)
            sink.support(new_id)
            supported.append(new_id)
            if effect.restores_id is not None:
                sink.carry_support(new_id, effect.restores_id)
        elif isinstance(effect, Retype | Reinstate):
            sink.retype(effect.version_id, effect.status)
            if isinstance(effect, Reinstate):
                reinstated.append((effect.version_id, effect.status))
        elif isinstance(effect, LinkSupersedes):
            sink.link_supersedes(effect.version_id, effect.supersedes_id)
        elif isinstance(effect, Support):
            sink.support(effect.version_id)
            supported.append(effect.version_id)
        elif isinstance(effect, Tombstone):
            sink.tombstone(effect.version_id)
            tombstoned.append(effect.version_id)
    head_after = new_id if decision.head_id == NEW else decision.head_id
    sink.move_head(head_after)
    return Outcome(head_after, new_id, tuple(supported), tuple(tombstoned), tuple(reinstated),
                   new_id or first_touched(decision) or head_after)


def first_touched(decision: Decision) -> int | None:
    """The existing version an operation acted on first (its log row points there)."""
    for effect in decision.effects:
        if isinstance(effect, Tombstone | Support | Retype | Reinstate):
            return effect.version_id
    return None


def valid_to_after(status: Status, valid_to: T | None, now: T) -> T | None:
    """A version's interval end after it takes ``status``: open while the status
    is open, closed at ``now`` when it leaves, an earlier end kept."""
    if status in OPEN_STATUSES:
        return None
    return now if valid_to is None else valid_to
