"""Small helpers of the production settings (settings.py, block "production / HTTPS")."""

from __future__ import annotations

from django.http import HttpRequest


def client_ip(request: HttpRequest) -> str | None:
    """The client's address behind the TLS proxy (PMEM_HTTPS=1), for the login lockout.

    The proxy appends the address it saw to X-Forwarded-For (nginx:
    ``proxy_add_x_forwarded_for``); everything left of that entry came from the client and
    may be forged, so only the right-most entry counts. Without the header, the peer."""
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    last = forwarded.rsplit(",", 1)[-1].strip()
    return last or request.META.get("REMOTE_ADDR")
