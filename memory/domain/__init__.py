"""The pure core of P-Mem: its vocabulary, typed operations, the cell state machine (SPEC §3),
rollback (SPEC §4), the effect interpreter, source trust and valid time (SPEC §8) and
materialization (SPEC §7). No Django import anywhere below."""

from __future__ import annotations

from .cells import decide, decide_late
from .interpret import EffectSink, Outcome, interpret, valid_to_after
from .model import (
    BIGINT_MAX,
    KEY_MAX_CHARS,
    NEW,
    BadParameter,
    CellState,
    Decision,
    Effect,
    InvalidOperation,
    LinkSupersedes,
    NewVersion,
    OpRequest,
    Reinstate,
    Retype,
    Support,
    Tombstone,
    VersionView,
    normalize_key,
    normalize_value,
    same_value,
)
from .plan import HeadView, Item, OpInput, Plan
from .vocabulary import (
    ASSERTIONS,
    CREATING_OPS,
    DISCLOSURES,
    EXPIRE,
    EXPIRY_ACTOR,
    HEAD_STATUSES,
    LOG_TYPES,
    OBSERVATION_OPS,
    OPEN_STATUSES,
    REINSTATE,
    RESTORABLE_STATUSES,
    RETRACTED_STATUSES,
    SETTLED_CHANNEL,
    SETTLED_STATES,
    SUPERUSER,
    SYSTEM_ACTOR,
    UNSETTLED_STATES,
    VALUE_OPS,
    CellStatus,
    EvidenceState,
    Method,
    OpType,
    Role,
    Status,
    cell_status,
    may_act,
    may_manage,
)

__all__ = [
    "ASSERTIONS", "BIGINT_MAX", "BadParameter", "CREATING_OPS", "DISCLOSURES", "EXPIRE", "EXPIRY_ACTOR", "HEAD_STATUSES", "KEY_MAX_CHARS", "LOG_TYPES", "NEW",
    "OBSERVATION_OPS", "OPEN_STATUSES", "RESTORABLE_STATUSES", "SYSTEM_ACTOR", "Method", "REINSTATE", "RETRACTED_STATUSES", "SETTLED_CHANNEL", "SETTLED_STATES", "SUPERUSER",
    "UNSETTLED_STATES", "VALUE_OPS", "CellState", "CellStatus", "Decision", "Effect",
    "EffectSink", "EvidenceState", "HeadView", "InvalidOperation", "Item", "LinkSupersedes",
    "NewVersion", "OpInput", "OpRequest", "OpType", "Outcome", "Plan", "Reinstate", "Retype",
    "Role", "Status", "Support", "Tombstone", "VersionView", "cell_status", "decide",
    "decide_late", "interpret", "may_act", "may_manage", "normalize_key", "normalize_value", "same_value",
    "valid_to_after",
]
