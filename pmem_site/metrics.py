"""``GET /metrics``: the Prometheus text exposition of this host (CONTRACT, "Operating it").

What the processes of this host counted (``memory.metrics``, prometheus_client's multiprocess
mode: every folder beside this process's ``PROMETHEUS_MULTIPROC_DIR``, so the web server shows
the workers' counters when they share the data directory, as under ``make run``), and the
instance-wide gauges read from the database at scrape time: ``pmem_unsettled_observations``
and ``pmem_oldest_unsettled_seconds``. A worker host of its own serves the same with
``PMEM_METRICS_PORT`` (:func:`serve_worker_metrics`).

Access: from 127.0.0.1 (a request a proxy forwarded is not from there), or with
``Authorization: Bearer $PMEM_METRICS_TOKEN`` when that is set; 403 otherwise.
"""

from __future__ import annotations

import glob
import hmac
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector

from memory import metrics

log = logging.getLogger("pmem.metrics")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_LOOPBACK = {"127.0.0.1", "::1"}


class _HostCollector:
    """Every process's values on this host: the ``*.db`` files of this process's folder
    and of the folders beside it (one per role: web, worker, other)."""

    def collect(self) -> Iterable[Metric]:
        own = settings.PMEM_METRICS_DIR or os.environ.get("PROMETHEUS_MULTIPROC_DIR")
        if not own:
            return []
        files = glob.glob(os.path.join(Path(own).parent, "*", "*.db"))
        return MultiProcessCollector.merge(files, accumulate=True)


# Per active webhook, its next event (the first after its cursor that its ops filter wants:
# one probe of the (namespace, cursor) index each).
_OLDEST_UNDELIVERED = (
    "SELECT COALESCE(EXTRACT(EPOCH FROM now() - min(next.committed_at)), 0)"
    " FROM memory_webhookendpoint w CROSS JOIN LATERAL ("
    "  SELECT e.committed_at FROM memory_changeevent e WHERE e.namespace_id = w.namespace_id"
    "  AND e.cursor > w.delivered AND (cardinality(w.ops) = 0 OR e.op = ANY(w.ops))"
    "  ORDER BY e.cursor LIMIT 1) next WHERE w.active")


class _UnsettledCollector:
    """The instance-wide gauges, from the database (the partial index of unsettled rows)."""

    def collect(self) -> Iterator[Metric]:
        count = GaugeMetricFamily("pmem_unsettled_observations",
                                  "Observations stored but not committed or failed yet.")
        oldest = GaugeMetricFamily("pmem_oldest_unsettled_seconds",
                                   "Age of the oldest unsettled observation (0 when none).")
        up = GaugeMetricFamily("pmem_database_up", "1 when the database answered this scrape.")
        undelivered = GaugeMetricFamily(
            "pmem_webhook_oldest_undelivered_seconds",
            "Age of the oldest change event an active webhook has still to deliver (0: none).")
        try:
            with connection.cursor() as cur:
                cur.execute("SELECT count(*), COALESCE(EXTRACT(EPOCH FROM now() -"
                            " min(received_at)), 0) FROM memory_evidence"
                            " WHERE state IN ('pending', 'processing')")
                n, age = cur.fetchone()
                cur.execute(_OLDEST_UNDELIVERED)
                (lag,) = cur.fetchone()
        except Exception as exc:  # a scrape during an outage says so, it does not fail
            connection.close()
            log.warning("metrics: the database did not answer: %s", exc)
            up.add_metric([], 0)
            yield up
            return
        count.add_metric([], float(n))
        oldest.add_metric([], float(age))
        undelivered.add_metric([], float(lag))
        up.add_metric([], 1)
        yield from (count, oldest, undelivered, up)


def exposition(*, database: bool = True) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_HostCollector())
    if database:
        registry.register(_UnsettledCollector())
    return generate_latest(registry)


def allowed(remote_addr: str, forwarded: bool, authorization: str) -> bool:
    """From the loopback (not through a proxy), or with the bearer token when one is set."""
    token = settings.PMEM_METRICS_TOKEN
    if token and hmac.compare_digest(authorization.encode(), f"Bearer {token}".encode()):
        return True
    return remote_addr in _LOOPBACK and not forwarded


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    forwarded = bool(request.META.get("HTTP_X_FORWARDED_FOR") or
                     request.META.get("HTTP_FORWARDED"))
    if not allowed(request.META.get("REMOTE_ADDR", ""), forwarded,
                   request.META.get("HTTP_AUTHORIZATION", "")):
        return HttpResponse("metrics: from 127.0.0.1, or with Authorization: Bearer "
                            "$PMEM_METRICS_TOKEN\n", status=403, content_type="text/plain")
    return HttpResponse(exposition(), content_type=CONTENT_TYPE)


class RequestMetricsMiddleware:
    """``pmem_http_requests_total{view, method, status}`` and
    ``pmem_http_request_seconds{view, method}``. ``view`` is the URL pattern's name (never
    the path: it would carry namespaces and keys), ``unmatched`` when none matched."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        view = (match.view_name if match is not None else "") or "unmatched"
        method = request.method if request.method in _METHODS else "other"
        metrics.HTTP_REQUESTS.labels(view=view, method=method,
                                     status=str(response.status_code)).inc()
        metrics.HTTP_SECONDS.labels(view=view, method=method).observe(
            time.perf_counter() - started)
        return response


_METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}


# --- a worker host's own endpoint --------------------------------------------------------------


def serve_worker_metrics(port: int, bind: str = "127.0.0.1") -> threading.Thread:
    """Serve this host's metrics (no database gauges: the web's /metrics has them) on
    ``bind:port`` from a worker's main process, under the same access rule."""
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    def app(environ: dict[str, Any], start: Callable[..., Any]) -> list[bytes]:
        if environ.get("PATH_INFO") != "/metrics":
            start("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found\n"]
        forwarded = bool(environ.get("HTTP_X_FORWARDED_FOR") or environ.get("HTTP_FORWARDED"))
        if not allowed(environ.get("REMOTE_ADDR", ""), forwarded,
                       environ.get("HTTP_AUTHORIZATION", "")):
            start("403 Forbidden", [("Content-Type", "text/plain")])
            return [b"forbidden\n"]
        start("200 OK", [("Content-Type", CONTENT_TYPE)])
        return [exposition(database=False)]

    server = make_server(bind, port, app, handler_class=Quiet)
    thread = threading.Thread(target=server.serve_forever, name="pmem-metrics", daemon=True)
    thread.start()
    return thread
