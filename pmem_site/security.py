"""Small helpers of the production settings (settings.py, block "production / HTTPS"), and the
middleware that refuses what no page can use."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render


def client_ip(request: HttpRequest) -> str | None:
    """The client's address behind the TLS proxy (PMEM_HTTPS=1), for the login lockout.

    The proxy appends the address it saw to X-Forwarded-For (nginx:
    ``proxy_add_x_forwarded_for``); everything left of that entry came from the client and
    may be forged, so only the right-most entry counts. Without the header, the peer."""
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    last = forwarded.rsplit(",", 1)[-1].strip()
    return last or request.META.get("REMOTE_ADDR")


class RefuseNullCharacters:
    """A query parameter holding a NUL byte is a 400 naming it, on every page and endpoint.

    PostgreSQL text cannot hold NUL: a page that passed one on to a query would fail there
    with a 500. Forms refuse it already (Django's null-character validator); this covers the
    parameters views read themselves."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        for name, values in request.GET.lists():
            if "\x00" in name or any("\x00" in value for value in values):
                return _null_refused(request, name.replace("\x00", "\\0"))
        return self.get_response(request)


def _null_refused(request: HttpRequest, name: str) -> HttpResponse:
    message = "null characters are not allowed"
    if request.path.startswith("/api/"):
        return JsonResponse({"error": f"{name}: {message}", "field": name}, status=400)
    return render(request, "explorer/bad_parameter.html",
                  {"error": SimpleNamespace(name=name, message=message)}, status=400)
