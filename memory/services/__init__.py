"""Every write to P-Mem. Keyword-only, typed, one transaction each."""

from __future__ import annotations

from memory.domain import OpInput

from .batch import Applied, CellNotFound
from .embeddings import EmbedderMismatch
from .erase import cell_erase, erase_followup, erase_preview
from .graph import operation_apply
from .ingest import (
    ExtractionFailed,
    IdempotencyConflict,
    Recorded,
    namespace_drain,
    observation_commit,
    observation_commit_at_once,
    observation_extract,
    observation_fail,
    observation_ingest,
    observation_record,
    observation_retry,
    observations_ingest,
    observations_record,
)
from .namespace_delete import NamespaceDeleted, namespace_delete
from .namespaces import (
    InvalidName,
    LastAdmin,
    membership_remove,
    membership_set,
    name_check,
    namespace_create,
)
from .observation_batch import BatchIdempotencyConflict, BatchRecorded, observations_record_batch
from .planning import ModelUnavailable
from .tokens import (
    TokenRejected,
    audit_record,
    clean_namespace_prefix,
    demo_secret,
    namespace_reached,
    token_authenticate,
    token_bind,
    token_create,
    token_digest,
    token_revoke,
    token_usable,
)
from .trust import SourceRefused, source_claim, trust_clear, trust_set
from .undo import NotUndoable, operation_undo

__all__ = [
    "EmbedderMismatch",
    "Applied", "CellNotFound", "ExtractionFailed", "IdempotencyConflict", "InvalidName", "LastAdmin", "ModelUnavailable",
    "OpInput", "Recorded", "TokenRejected", "audit_record", "cell_erase", "demo_secret",
    "erase_followup", "erase_preview",
    "membership_remove", "membership_set", "name_check", "namespace_create", "namespace_drain",
    "observation_commit", "observation_commit_at_once", "observation_extract",
    "observation_fail", "observation_ingest",
    "observation_record", "observation_retry", "observations_ingest", "observations_record",
    "BatchIdempotencyConflict", "BatchRecorded", "observations_record_batch",
    "operation_apply", "token_authenticate", "token_create", "token_digest", "token_revoke",
    "token_usable", "NotUndoable", "operation_undo", "SourceRefused", "source_claim",
    "token_bind", "trust_clear", "trust_set", "clean_namespace_prefix", "namespace_reached",
    "NamespaceDeleted", "namespace_delete",
]
