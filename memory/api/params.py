"""Query parameters of the long-history and time-travel reads (CONTRACT, "Long histories and
time travel"): each refusal is a 400 naming the parameter."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from django.utils.dateparse import parse_datetime
from rest_framework import exceptions

from memory.history import HistoryError

# A '+' of a zone offset that reached us unencoded in a query string is a space: "…T10:00 01:00".
_SPACED_OFFSET = re.compile(r"(.*\d)\s(\d\d(?::?\d\d)?)")


def parse_as_of(raw: str | None, field: str = "as_of") -> datetime | None:
    """An ISO-8601 time with a zone (``Z`` or an offset), else a 400 naming ``field``."""
    if raw is None or raw == "":
        return None
    text = raw.strip()
    if len(text) > 64:
        raise exceptions.ValidationError({field: "an ISO-8601 time with a zone"})
    spaced = _SPACED_OFFSET.fullmatch(text)
    if spaced and "T" in text and not re.search(r"[+-]\d\d:?\d\d$|Z$", text):
        text = f"{spaced.group(1)}+{spaced.group(2)}"
    try:
        moment = parse_datetime(text)
    except ValueError:
        moment = None
    if moment is None:
        raise exceptions.ValidationError(
            {field: "an ISO-8601 time with a zone, e.g. 2026-12-01T10:00:00Z"})
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise exceptions.ValidationError(
            {field: "needs a zone (Z or an offset such as +01:00): a time without one is "
                    "ambiguous"})
    return moment


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
