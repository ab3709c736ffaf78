"""``GET /healthz``: does the database answer, does the broker answer."""

from __future__ import annotations

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
        return f"{type(exc).__name__}: {exc}"


def _broker_ok() -> str | None:
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        return None
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    db_error, broker_error = _database_ok(), _broker_ok()
    body = {
        "status": "ok" if not (db_error or broker_error) else "error",
        "database": db_error or "ok",
        "broker": broker_error or "ok",
        "model": "configured" if settings.PMEM_LLM_BASE_URL else "none",
    }
    return JsonResponse(body, status=200 if body["status"] == "ok" else 503)
