"""One exception handler: every API error is JSON ``{"error": ...}`` with a 4xx that names
the field at fault. Domain exceptions map here and nowhere else."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_handler

from memory.domain import InvalidOperation
from memory.history import HistoryError
from memory.services import CellNotFound, IdempotencyConflict, InvalidName, SourceRefused


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
    if isinstance(exc, InvalidOperation):
        return Response({"error": exc.reason}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, CellNotFound):
        return Response({"error": f"no cell with key {exc.key!r}", "field": "key"},
                        status=status.HTTP_404_NOT_FOUND)
    if isinstance(exc, HistoryError):  # a cursor or version of another key, an empty search
        return Response({"error": f"{exc.field}: {exc}", "field": exc.field}, status=400)
    if isinstance(exc, SourceRefused):  # SPEC §8: a source this token may not claim
        return Response({"error": str(exc), "field": "source"}, status=status.HTTP_403_FORBIDDEN)
    if isinstance(exc, IdempotencyConflict):  # the first observation stays as it was
        return Response({"error": str(exc), "field": "idempotency_key",
                         "observation": exc.first.pk}, status=status.HTTP_409_CONFLICT)
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
