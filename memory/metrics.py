"""The process-side metrics of ``GET /metrics`` (CONTRACT, "Operating it"), from the official
``prometheus_client``.

Every process of a host writes its own values into ``PROMETHEUS_MULTIPROC_DIR`` (multiprocess
mode: gunicorn's workers and Celery's pool processes are separate processes; the settings point
it at ``PMEM_DATA_DIR/metrics/<role>``), and the scrape merges them (``pmem_site.metrics``).
The instance-wide gauges (unsettled observations, the age of the oldest) are read from the
database at scrape time, not kept here.

No label carries a namespace, a key, a value or a URL: labels are fixed words (a model call's
``kind``, an error's ``reason``, a view's URL name, a method, a status code).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from prometheus_client import Counter, Histogram, values

# Reading a setting configures Django, and the settings choose the multiprocess directory
# (PROMETHEUS_MULTIPROC_DIR). prometheus_client chose its value class when it was imported,
# which may have been before: choose again, before the first metric below is made.
_ = settings.PMEM_DATA_DIR
values.ValueClass = values.get_value_class()

#: Latency buckets (seconds) of model requests and commits: milliseconds to minutes.
_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)

OBSERVATIONS_RECORDED = Counter(
    "pmem_observations_recorded", "Observations stored as evidence (acknowledged or about to be).")
OBSERVATIONS_COMMITTED = Counter(
    "pmem_observations_committed", "Observations committed (their operations applied).")
OBSERVATIONS_FAILED = Counter(
    "pmem_observations_failed", "Observations marked failed, by reason.", ["reason"])
OBSERVATIONS_REQUEUED = Counter(
    "pmem_observations_requeued",
    "Unsettled observations the sweep queued again (no live task held them).")
PLANS_REDONE = Counter(
    "pmem_plans_redone",
    "Plans made ahead of their turn that an earlier commit made stale: planned again.")
DRAINS_ADOPTED = Counter(
    "pmem_drains_adopted",
    "Namespaces a worker process drained on a thread while its own drain waited on the model.")
PLANS_ON_EARLIER = Counter(
    "pmem_plans_on_earlier_plans",
    "Plans made on what earlier observations' plans, not committed yet, leave of their keys.")
COMMIT_SECONDS = Histogram(
    "pmem_commit_seconds",
    "Seconds one commit transaction took (one observation, or a group without a model).",
    buckets=_BUCKETS)
SETTLE_SECONDS = Histogram(
    "pmem_observation_settle_seconds",
    "Seconds from an observation's receipt to its commit.", buckets=_BUCKETS)
MODEL_REQUEST_SECONDS = Histogram(
    "pmem_model_request_seconds", "Seconds of one HTTP request to a model endpoint, by kind.",
    ["kind"], buckets=_BUCKETS)
MODEL_ERRORS = Counter(
    "pmem_model_errors", "Model calls that failed for good, by kind and reason.",
    ["kind", "reason"])
TASK_RETRIES = Counter(
    "pmem_task_retries", "Tasks that met an outage and were scheduled again, by cause.",
    ["cause"])
HTTP_REQUESTS = Counter(
    "pmem_http_requests", "HTTP requests answered, by view, method and status.",
    ["view", "method", "status"])
HTTP_SECONDS = Histogram(
    "pmem_http_request_seconds", "Seconds to answer an HTTP request, by view.",
    ["view", "method"], buckets=_BUCKETS)
HTTP_UNAVAILABLE = Counter(
    "pmem_http_unavailable", "503 answers because a dependency was unreachable, by cause.",
    ["cause"])

WEBHOOK_DELIVERIES = Counter(
    "pmem_webhook_deliveries",
    "Webhook delivery attempts, by outcome (delivered, failed, timeout, unreachable, refused).",
    ["outcome"])


# The series an operator's dashboards and alerts name exist (at zero) before the first event.
for _reason in ("extraction", "model", "time_limit", "commit", "other"):
    OBSERVATIONS_FAILED.labels(reason=_reason)
#: The fixed words a failed model call is counted by (memory.llm.errors, memory.llm.transport).
MODEL_ERROR_REASONS = ("error", "transport", "content", "unsupported_form", "client",
                       "connection", "timeout", "http_429", "http_5xx", "http_4xx",
                       "unparsable", "wrong_schema", "malformed", "no_choices")
for _kind in ("extract", "identity", "annotate", "answer", "prune", "embed", "probe"):
    MODEL_REQUEST_SECONDS.labels(kind=_kind)
    for _error in MODEL_ERROR_REASONS:
        MODEL_ERRORS.labels(kind=_kind, reason=_error)
for _cause in ("model", "database", "broker"):
    TASK_RETRIES.labels(cause=_cause)
for _outcome in ("delivered", "failed", "timeout", "unreachable", "refused"):
    WEBHOOK_DELIVERIES.labels(outcome=_outcome)
for _cause in ("database_unavailable", "disk_full"):
    HTTP_UNAVAILABLE.labels(cause=_cause)


@contextmanager
def timed(histogram: Histogram, **labels: str) -> Iterator[None]:
    """Observe the seconds the block took (also when it raises)."""
    started = time.perf_counter()
    try:
        yield
    finally:
        (histogram.labels(**labels) if labels else histogram).observe(
            time.perf_counter() - started)
