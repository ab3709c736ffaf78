"""Where the ingest steps were imported from before they became :mod:`memory.services.ingest`
(one module per step): their public names, kept importable here for callers outside it."""

from .ingest import (
    ExtractionFailed,
    IdempotencyConflict,
    Recorded,
    evidence_text,
    extract_facts,
    idempotency_digest,
    namespace_drain,
    namespace_draining,
    observation_commit,
    observation_commit_at_once,
    observation_extract,
    observation_fail,
    observation_ingest,
    observation_record,
    observation_retry,
    observations_ingest,
    observations_record,
    request_digest,
)

__all__ = [
    "ExtractionFailed", "IdempotencyConflict", "Recorded", "evidence_text", "extract_facts",
    "idempotency_digest", "namespace_drain", "namespace_draining", "observation_commit",
    "observation_commit_at_once", "observation_extract", "observation_fail",
    "observation_ingest", "observation_record", "observation_retry", "observations_ingest",
    "observations_record", "request_digest",
]
