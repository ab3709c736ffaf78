"""Every write to P-Mem. Keyword-only, typed, one transaction each."""

from __future__ import annotations

from .graph import Applied, CellNotFound, OpInput, apply_in_transaction, operation_apply
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

__all__ = [
    "Applied", "CellNotFound", "ExtractionFailed", "InvalidName", "OpInput", "Recorded",
    "apply_in_transaction", "membership_set", "namespace_create", "namespace_drain",
    "observation_commit", "observation_extract", "observation_fail", "observation_ingest",
    "observation_record", "observation_retry", "observations_ingest", "observations_record",
    "operation_apply", "token_create",
]

from .erase import cell_erase, erase_followup, erase_preview  # noqa: E402

__all__ += ["cell_erase", "erase_followup", "erase_preview"]
