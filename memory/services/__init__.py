"""Every write to P-Mem. Keyword-only, typed, one transaction each."""

from __future__ import annotations

from memory.domain import OpInput

from .batch import Applied, CellNotFound
from .erase import cell_erase, erase_followup, erase_preview
from .graph import operation_apply
from .namespaces import InvalidName, membership_set, namespace_create, token_create
from .observations import (
    ExtractionFailed,
    Recorded,
    namespace_drain,
    observation_commit,
    observation_extract,
    observation_fail,
    observation_ingest,
    observation_record,
    observation_retry,
    observations_ingest,
    observations_record,
)
from .planning import ModelUnavailable

__all__ = [
    "Applied", "CellNotFound", "ExtractionFailed", "InvalidName", "ModelUnavailable", "OpInput",
    "Recorded", "cell_erase", "erase_followup", "erase_preview", "membership_set",
    "namespace_create", "namespace_drain", "observation_commit", "observation_extract",
    "observation_fail", "observation_ingest",
    "observation_record", "observation_retry", "observations_ingest", "observations_record",
    "operation_apply", "token_create",
]
