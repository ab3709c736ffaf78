"""Query parameters of the API's reads (CONTRACT, "Long histories and time travel", the paged
lists): each refusal is a 400 naming the parameter. Times are read by the one parser of times,
:func:`memory.domain.instants.parse_instant`, whose refusal the exception handler answers."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from rest_framework import exceptions
from rest_framework.request import Request

from memory.domain import BIGINT_MAX
from memory.domain.metadata import Metadata, MetadataRefused, parse_filter

#: Default and largest page of a paged list (cells, operations).
PAGE_DEFAULT = 50
PAGE_MAX = 500


def digits(raw: str) -> int | None:
    """A non-negative integer written in ASCII digits, else None. (``str.isdigit`` alone is
    true of '²' and '①', which ``int`` refuses; and ``int`` alone takes '٣', '+3', ' 3'.)"""
    return int(raw) if raw.isascii() and raw.isdigit() else None


def page_limit(request: Request, default: int = PAGE_DEFAULT) -> int:
    limit = digits(request.query_params.get("limit", str(default)))
    if limit is None or not 1 <= limit <= PAGE_MAX:
        raise exceptions.ValidationError({"limit": f"an integer from 1 to {PAGE_MAX}"})
    return limit


def bounded_int(params: Any, name: str, *, default: int, low: int, high: int) -> int:
    """An integer query parameter in ``[low, high]`` (ASCII digits only), else 400 naming it."""
    raw = params.get(name)
    if raw is None or raw == "":
        return default
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 12 or not low <= int(raw) <= high:
        raise exceptions.ValidationError({name: f"an integer from {low} to {high}"})
    return int(raw)


def version_id(params: Any, name: str) -> int | None:
    """A version id query parameter, else 400 naming it."""
    raw = params.get(name)
    if raw is None or raw == "":
        return None
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:
        raise exceptions.ValidationError({name: "a version id"})
    return int(raw)


def operation_before(params: Any) -> int | None:
    """The operation log's ``before`` cursor (an operation id), else 400 naming it."""
    raw = params.get("before")
    if raw is None:
        return None
    before = digits(raw)
    if before is None or before > BIGINT_MAX:
        raise exceptions.ValidationError({"before": "an operation id"})
    return before


def zero_or_one(params: Any, name: str) -> bool:
    """A switch: ``0``/``false`` (the default) or ``1``/``true``, else 400 naming it."""
    raw = params.get(name, "0")
    if raw not in ("0", "1", "true", "false"):
        raise exceptions.ValidationError({name: "0 or 1"})
    return raw in ("1", "true")


def next_url(request: Request, **params: Any) -> str:
    """This request's URL with ``params`` replaced: the next page's."""
    query = {k: v for k, v in request.query_params.items() if k not in params}
    query.update(params)
    return request.build_absolute_uri(request.path) + "?" + urlencode(query)


def metadata_filter(params: Any) -> Metadata | None:
    """The ``filter`` query parameter: metadata as a JSON object (400 naming it otherwise)."""
    raw = params.get("filter")
    if raw is None or raw == "":
        return None
    try:
        return parse_filter(raw)
    except MetadataRefused as refused:
        raise exceptions.ValidationError({"filter": str(refused)}) from None
