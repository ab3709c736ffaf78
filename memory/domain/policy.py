"""Source trust and valid time (SPEC §8), and which version a withdrawal names: pure rules.

The commit asks these questions of each fact of an observation (never of an operation a
person or client asked for: an explicit operation is applied as asked); it loads what they need and nothing more.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from .model import same_value
from .vocabulary import CREATING_OPS, OpType, Status


def replaces_head(op: OpType, value: str | None, has_head: bool) -> bool:
    """Whether the fact would replace a head, so trust and valid time apply to it: an accept
    or a reject with a value, on a cell with a head. A ``hard_commit`` fact is no exception
    (SPEC §8): it only keeps the annotator from dropping it as a noop."""
    creates = op in CREATING_OPS and bool(value and value.strip())
    return creates and has_head


def is_late(observed_at: datetime | None, head_valid_from: datetime) -> bool:
    """A report whose valid time is older than the head's goes into the history (it never displaces a newer head)."""
    return observed_at is not None and observed_at < head_valid_from


def valid_time_slot(versions: Iterable[tuple[datetime, int]], observed_at: datetime
                    ) -> tuple[int | None, datetime | None]:
    """Where a late report goes among the key's versions ``(valid_from, id)``: the version
    valid just before ``observed_at`` (its ``supersedes`` edge) and when the next one became
    valid (its ``valid_to``). Ids compare by magnitude: unsaved versions have negative ids."""
    ordered = sorted(set(versions), key=lambda pair: (pair[0], abs(pair[1])))
    before = [vid for valid_from, vid in ordered if valid_from <= observed_at]
    after = [valid_from for valid_from, _ in ordered if valid_from > observed_at]
    return (before[-1] if before else None), (after[0] if after else None)


def head_trust(levels: Mapping[str, int], sources: Iterable[str]) -> int:
    """The head's trust: the highest level among the sources of the evidence supporting it
    (unlisted sources: 0; no levels configured: every source is equal)."""
    if not levels:
        return 0
    return max((levels.get(source, 0) for source in sources), default=0)


def outranked(source_level: int, head_level: int) -> bool:
    """A fact from a less trusted source than the head's contests instead of replacing it."""
    return source_level < head_level


OUTRANKED_REASON = "source trusted less than the head's support: contest"


def withdrawn_target(versions: Iterable[tuple[int, str, str]], value: str | None) -> int | None:
    """The version a 'reported in error' fact names: of the key's versions ``(id, value,
    status)``, newest first, the first not revoked that holds ``value``."""
    if not value:
        return None
    for version_id, held, status in versions:
        if status != Status.REVOKED and same_value(held, value):
            return version_id
    return None
