"""Query parameters of the long-history and time-travel reads (CONTRACT, "Long histories and
time travel"): each refusal is a 400 naming the parameter."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rest_framework import exceptions

from memory.domain.instants import TimeRefused, parse_instant
from memory.history import HistoryError


def parse_as_of(raw: str | None, field: str = "as_of") -> datetime | None:
    """An ISO-8601 time with a zone (``Z`` or an offset), in UTC; else a 400 naming ``field``
    (the one reading of times, :mod:`memory.domain.instants`)."""
    try:
        return parse_instant(raw, field=field)
    except TimeRefused as refused:
        raise exceptions.ValidationError({refused.field: refused.message}) from None


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


def refused(error: HistoryError) -> exceptions.ValidationError:
    """A history read's refusal as the API's 400 naming the parameter."""
    return exceptions.ValidationError({error.field: str(error)})
