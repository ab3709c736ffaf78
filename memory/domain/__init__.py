"""The pure core of P-Mem: statuses, typed operations, the cell state machine (SPEC §3),
rollback (SPEC §4) and materialization (SPEC §7). No Django import anywhere below."""

from __future__ import annotations

from .cells import decide, decide_late
from .model import (
    HEAD_STATUSES,
    KEY_MAX_CHARS,
    NEW,
    CellState,
    Decision,
    Effect,
    InvalidOperation,
    LinkSupersedes,
    NewVersion,
    OpRequest,
    OpType,
    Reinstate,
    Retype,
    Status,
    Support,
    Tombstone,
    VersionView,
    normalize_key,
    normalize_value,
    same_value,
)

__all__ = [
    "HEAD_STATUSES", "KEY_MAX_CHARS", "NEW", "CellState", "Decision", "Effect", "InvalidOperation",
    "LinkSupersedes", "NewVersion", "OpRequest", "OpType", "Reinstate", "Retype", "Status",
    "Support", "Tombstone", "VersionView", "decide", "decide_late", "normalize_key",
    "normalize_value",
    "same_value",
]
