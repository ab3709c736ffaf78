"""Ingest: an observation is stored first, extracted, then committed in ``seq`` order per
namespace (SPEC §5). One module per step, each with a public interface::

    record    observation_record: one transaction — lock the namespace row, take the next
              seq, insert the evidence (state pending). Nothing else happens before it
              commits.
    extract   observation_extract: no transaction held — structured facts as given, else
              the rule extractor or the model. The result is stored once (compare-and-swap),
              so a redelivered task reuses it and never calls the model twice.
    plan      prepare: everything a commit needs, computed before its transaction opens
              (with a model: keys resolved and annotated, the plan made).
    commit    commit_prepared: consecutive observations in ONE transaction — one batch, one
              overlay, one statement per table — marked committed.
    drain     drain: one drainer per namespace (a session-level advisory lock, never held
              inside a transaction) takes the lowest unsettled seqs, by the strategy passed
              in: in order (drain_in_order, no model) or planned ahead on threads while the
              head commits (ahead.drain_ahead, with adopt for idle threads). A head of the
              line that nobody is extracting (its message lost, its task waiting to retry)
              is extracted by the drain itself: the drain never waits on a task that may
              not exist.
    line      the namespace's line of unsettled observations and its drain lock.
    threads   the process's threads ahead.drain_ahead extracts and plans on (one pool each).
    at_once   record and commit in one transaction, for callers that wait anyway.
    pipeline  namespace_drain and in-process ingest: the steps composed (nothing imports it
              back).

A single observation is a group of one: the same preparation, the same commit. Extraction may
finish in any order; commitment never reorders. A crash anywhere leaves the evidence pending
or processing, and the next delivery, drain or sweep (``memory.services.sweep``) finishes it
exactly once.
"""

from .commit import observation_commit
from .extract import (
    ExtractionFailed,
    FactsRefused,
    evidence_text,
    extract_facts,
    fact_expiry,
    observation_extract,
)
from .line import namespace_draining, observation_fail, observation_retry
from .pipeline import (
    namespace_drain,
    observation_commit_at_once,
    observation_ingest,
    observations_ingest,
)
from .record import (
    IdempotencyConflict,
    Recorded,
    idempotency_digest,
    observation_record,
    observations_record,
    request_digest,
)

__all__ = [
    "ExtractionFailed", "FactsRefused", "IdempotencyConflict", "Recorded", "evidence_text",
    "extract_facts", "fact_expiry", "idempotency_digest", "namespace_drain",
    "namespace_draining", "observation_commit", "observation_commit_at_once",
    "observation_extract", "observation_fail", "observation_ingest", "observation_record",
    "observation_retry", "observations_ingest", "observations_record", "request_digest",
]
