"""``GET /healthz`` (readiness): does the database answer, does the broker answer, which model
is configured and in which structured-output form it is asked (a model that is down does not
make the stack unhealthy: observations wait or fail visibly). 503 with what failed while the
database or the broker does not answer. ``GET /livez`` (liveness): 200 while the process runs."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from pmem_site.celery import app


def _database_ok() -> str | None:
    try:
        with connection.cursor() as cur:
            cur.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            row = cur.fetchone()
        return None if row else "the vector extension is missing"
    except Exception as exc:  # report, never raise: this is what health checks are for
        connection.close()  # a broken connection is not kept for the next request
        return f"{type(exc).__name__}: {exc}"


def _broker_ok() -> str | None:
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        return None
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


def _model() -> dict[str, Any] | str:
    """``{"name", "structured_output"}`` (and ``error`` while the endpoint fails), or
    ``"none"`` without a model. One short probe when this process has not talked to it yet."""
    from memory.llm.check import model_status
    from memory.llm.client import client_from_settings

    timeout = min(3.0, float(settings.PMEM_LLM_TIMEOUT))
    return model_status(client_from_settings(timeout=timeout, max_retries=0)) or "none"


@require_GET
def livez(request: HttpRequest) -> JsonResponse:
    """Liveness: 200 while the process runs and answers, whatever its dependencies do (a
    supervisor restarts a process that stops answering this, not one whose database is
    down: restarting it would not help)."""
    return JsonResponse({"status": "alive"})


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    db_error, broker_error = _database_ok(), _broker_ok()
    body = {
        "status": "ok" if not (db_error or broker_error) else "error",
        "database": db_error or "ok",
        "broker": broker_error or "ok",
        "model": _model(),
    }
    return JsonResponse(body, status=200 if body["status"] == "ok" else 503)
