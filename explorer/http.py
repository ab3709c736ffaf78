"""What every explorer page does with its request: who acts, the parameters it reads (numbers,
times, the as-of moment), where a form may send a person next, what every namespace page shows
around itself, and the one answer to a parameter it cannot use (400 naming it)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils.http import url_has_allowed_host_and_scheme

from explorer.access import Access
from memory.domain import BIGINT_MAX, BadParameter
from memory.domain.instants import parse_instant, zone_named
from memory.selectors.log import live_fingerprint

View = TypeVar("View", bound=Callable[..., HttpResponse])


def actor(request: HttpRequest) -> str:
    """Who an operation from this request is signed by."""
    return f"user:{request.user.get_username()}"


def is_htmx(request: HttpRequest) -> bool:
    return bool(getattr(request, "htmx", False))


def htmx_target(request: HttpRequest) -> str | None:
    """The element an htmx request swaps (django-htmx's ``request.htmx``, set by its
    middleware), None for a plain request."""
    htmx = getattr(request, "htmx", None)
    return htmx.target if htmx else None


def same_origin_path(target: str | None) -> str | None:
    """``target`` when it is a path on this site ('/ns/...'), else None: a ``next`` from a
    form must not send anyone to another site (an open redirect) or to a ``javascript:``
    URL. Django's check refuses a scheme, a host, '//' and '\\' tricks; a path must also
    start with one '/' and hold no control character."""
    if not target or not target.startswith("/") or not target.isprintable():
        return None
    return target if url_has_allowed_host_and_scheme(target, allowed_hosts=None) else None


def page_context(access: Access, section: str) -> dict[str, Any]:
    """What every namespace page shows around itself: the namespace, what the user may do,
    the navigation's section and the live poller's fingerprint."""
    return {"ns": access.namespace, "role": access.role, "can_act": access.can_act,
            "can_manage": access.can_manage, "section": section,
            "fingerprint": live_fingerprint(access.namespace)}


# --- parameters ------------------------------------------------------------------------------


def int_param(request: HttpRequest, name: str, default: int | None = None, *,
              maximum: int | None = None) -> int | None:
    """A whole number the page's URL carries, else BadParameter naming it."""
    raw = request.GET.get(name, "")
    if raw == "":
        return default
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:
        raise BadParameter(name, "a positive whole number")
    value = int(raw)
    if maximum is not None and value > maximum:
        raise BadParameter(name, f"at most {maximum}")
    return value


def id_param(raw: str) -> int | None:
    """An id written in ASCII digits that PostgreSQL's bigint holds, else None."""
    raw = raw[:20]
    return int(raw) if raw.isascii() and raw.isdigit() and 0 < int(raw) <= BIGINT_MAX else None


def as_of(request: HttpRequest) -> datetime | None:
    """``as_of`` as CONTRACT has it: ISO 8601 with a zone (the one parser of times,
    :mod:`memory.domain.instants`). Empty: the present (None)."""
    return parse_instant(request.GET.get("as_of"), field="as_of")


def local_as_of(at: str, zone: str) -> datetime:
    """The explorer's date-time field (no zone) read in the browser's ``zone`` (IANA name)."""
    moment = parse_instant(at, field="at", zone=zone_named(zone))
    if moment is None:
        raise BadParameter("at", "not a date and time")
    return moment


def as_of_param(moment: datetime) -> str:
    """The canonical ``as_of`` of a URL: ISO 8601 in UTC, to the microsecond, with its zone."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


# --- the one refusal -------------------------------------------------------------------------


def refused(request: HttpRequest, error: BadParameter) -> HttpResponse:
    """400 naming the parameter: JSON for the page's scripts, a short page for a person."""
    if "json" in request.headers.get("Accept", "") or request.path.endswith(("/graph/", "/timeline/")):
        return JsonResponse({"error": str(error), "parameter": error.field}, status=400)
    return render(request, "explorer/bad_parameter.html", {"error": error}, status=400)


def answers_refusals(view: View) -> View:
    """A page whose reads may refuse a parameter (:class:`~memory.domain.BadParameter`)
    answers :func:`refused` instead."""
    @functools.wraps(view)
    def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except BadParameter as error:
            return refused(request, error)

    return guarded  # type: ignore[return-value]
