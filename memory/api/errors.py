"""One exception handler: every API error is JSON ``{"error": ...}`` with a 4xx that names
the field at fault. Domain exceptions map here and nowhere else. A database that cannot be
reached (down, restarting, out of disk) answers 503 with ``Retry-After``, here and, for the
pages and middleware outside DRF, in ``pmem_site.urls.handler500``."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_handler

from memory import metrics
from memory.domain import BadParameter, InvalidOperation
from memory.domain.instants import TimeRefused
from memory.services import (
    BatchIdempotencyConflict,
    CellNotFound,
    EmbedderMismatch,
    IdempotencyConflict,
    InvalidName,
    SourceRefused,
)


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "request body too large"
    default_code = "too_large"


def _first_error(detail: Any, path: str = "") -> tuple[str, str]:
    """The first (field path, message) in a DRF error structure."""
    if isinstance(detail, dict):
        for key, value in detail.items():
            if isinstance(key, int) or (str(key).isascii() and str(key).isdigit()):
                # a list serializer's errors, by item index
                return _first_error(value, f"{path}[{key}]")
            sub = key if key != "non_field_errors" else ""
            return _first_error(value, f"{path}.{sub}".strip(".") if sub else path)
    if isinstance(detail, list) and detail:
        for index, item in enumerate(detail):
            if item:  # list of per-item errors: skip items without errors
                inner = f"{path}[{index}]" if isinstance(item, dict | list) else path
                return _first_error(item, inner)
    return path, str(detail)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    outage = database_outage(exc)
    if outage is not None:
        answer = json_unavailable(outage)
        return Response(json.loads(answer.content), status=503,
                        headers={"Retry-After": answer["Retry-After"]})
    if isinstance(exc, InvalidOperation):
        return Response({"error": exc.reason}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, CellNotFound):
        return Response({"error": f"no cell with key {exc.key!r}", "field": "key"},
                        status=status.HTTP_404_NOT_FOUND)
    if isinstance(exc, TimeRefused):  # a time refused: answered like any refused input
        exc = exceptions.ValidationError({exc.field: exc.message})
    elif isinstance(exc, BadParameter):  # a cursor or version of another key, an empty search
        return Response({"error": str(exc), "field": exc.field}, status=400)
    if isinstance(exc, SourceRefused):  # SPEC §8: a source this token may not claim
        return Response({"error": str(exc), "field": "source"}, status=status.HTTP_403_FORBIDDEN)
    if isinstance(exc, IdempotencyConflict):  # the first observation stays as it was
        return Response({"error": str(exc), "field": "idempotency_key",
                         "observation": exc.first.pk}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, BatchIdempotencyConflict):  # nothing of the batch was stored
        refused = {"error": str(exc), "field": f"observations[{exc.index}].idempotency_key"}
        return Response(refused | ({"observation": exc.first} if exc.first is not None else {}),
                        status=status.HTTP_409_CONFLICT)
    if isinstance(exc, EmbedderMismatch):  # vectors of two embedders are never compared
        return Response({"error": str(exc), "field": "namespace", "embedder": exc.have,
                         "configured": exc.want}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, InvalidName):
        return Response({"error": str(exc), "field": "namespace"}, status=400)
    if isinstance(exc, RequestDataTooBig):
        exc = PayloadTooLarge()
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    if isinstance(exc, exceptions.ValidationError):
        field, message = _first_error(exc.detail)
        body: dict[str, Any] = {"error": f"{field}: {message}" if field else message,
                                "errors": exc.detail}
        if field:
            body["field"] = field
        return Response(body, status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, exceptions.ParseError):
        return Response({"error": f"malformed JSON: {exc.detail}", "field": "body"}, status=400)
    response = drf_handler(exc, context)
    if response is not None:
        detail = response.data.get("detail", response.data) if isinstance(response.data, dict) \
            else response.data
        response.data = {"error": str(detail)}
    return response


def json_not_found(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return JsonResponse({"error": "not found"}, status=404)


def json_server_error(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"error": "internal error; the request was not applied"}, status=500)


# --- outages: the database cannot be reached ---------------------------------------------------

#: SQLSTATE classes and codes that say the database cannot serve now, whatever the request:
#: connection exceptions (08), insufficient resources (53: disk full, out of memory, too many
#: connections), operator intervention (57P01-57P05: shutdown, crash, starting up), system
#: errors (58: I/O), and a read-only transaction on a server that became a replica.
_UNAVAILABLE_CLASSES = ("08", "53", "58")
_UNAVAILABLE_CODES = {"57P01", "57P02", "57P03", "57P04", "57P05", "25006"}


def database_outage(exc: BaseException | None) -> str | None:
    """``disk full`` / ``database unavailable`` when ``exc`` says the database cannot serve
    now (a 503, worth retrying), else None (a bug: a 500)."""
    if not isinstance(exc, OperationalError | InterfaceError):
        return None
    state = getattr(exc.__cause__, "sqlstate", None)
    if state is None or state[:2] in _UNAVAILABLE_CLASSES or state in _UNAVAILABLE_CODES:
        return "disk full" if state == "53100" else "database unavailable"
    return None


def retry_after() -> int:
    return max(1, int(settings.PMEM_RETRY_AFTER))


def outage_message(cause: str) -> str:
    if cause == "disk full":
        return "The database has no space left; nothing was stored."
    return "The database cannot be reached; nothing was stored."


def json_unavailable(cause: str) -> JsonResponse:
    """503 with ``Retry-After`` and a JSON error: the client may send the request again."""
    metrics.HTTP_UNAVAILABLE.labels(cause=cause.replace(" ", "_")).inc()
    response = JsonResponse({"error": f"{cause}: {outage_message(cause)} Retry later.",
                             "retry_after": retry_after()}, status=503)
    response["Retry-After"] = str(retry_after())
    return response
