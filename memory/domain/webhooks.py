"""Webhooks of the change feed (SPEC §12): which targets may be called, how a delivery is
signed, when a failed one is tried again. Pure Python: no Django, no network.

A delivery is signed as Standard Webhooks says (https://www.standardwebhooks.com/), by the
maintained ``standardwebhooks`` package, so that a receiver's own copy of it verifies what
we send: ``webhook-id`` names the event (the same on every redelivery, so a receiver can
drop a duplicate), ``webhook-timestamp`` the attempt, ``webhook-signature`` is
``v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`` keyed by the secret's base64 part.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from standardwebhooks import Webhook

from .vocabulary import LOG_TYPES

#: The ops an endpoint may filter on: every operation of the log, and an erase.
EVENT_OPS: tuple[str, ...] = (*LOG_TYPES, "erase")
SECRET_PREFIX = "whsec_"
SCHEMES = {"http": 80, "https": 443}

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class TargetRefused(ValueError):
    """A webhook URL (or the address its host resolves to) that must not be called."""


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str  # as written (the Host header, TLS's server name)
    port: int
    path: str  # path and query, never empty


def new_secret() -> str:
    """A fresh signing secret: ``whsec_`` and 24 random bytes in base64."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(24)).decode()


def webhook_id(namespace_id: int, cursor: int) -> str:
    """The event's ``webhook-id``: the namespace's id (never reused, unlike its name) and the
    event's cursor, so every attempt at one event, by any worker, carries the same id."""
    return f"evt_{namespace_id}_{cursor}"


#: An event's fields, in the order the feed serves them (memory.selectors.changes).
EVENT_FIELDS = ("cursor", "op", "key", "version", "ordinal", "value", "previous", "status",
                "cell_status", "actor", "method", "source", "reason", "observation",
                "committed_at", "head")


def event_json(row: tuple[Any, ...]) -> dict[str, Any]:
    """One event in the feed's shape (CONTRACT, "Change events") from a row of
    :data:`EVENT_FIELDS`' columns."""
    out = dict(zip(EVENT_FIELDS, row, strict=True))
    for name in ("previous", "head"):  # a raw cursor leaves jsonb as its text
        if isinstance(out[name], str):
            out[name] = json.loads(out[name])
    at = out["committed_at"]
    if isinstance(at, datetime):
        out["committed_at"] = at.isoformat().replace("+00:00", "Z")
    return out


def event_body(event: dict[str, Any]) -> bytes:
    """The bytes POSTed (and signed): the event's JSON."""
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False,
                      default=str).encode()


def signed_headers(secret: str, msg_id: str, body: bytes, at: datetime) -> dict[str, str]:
    """The Standard Webhooks headers of one attempt at ``at``."""
    when = at if at.tzinfo else at.replace(tzinfo=UTC)
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(when.timestamp())),
        "webhook-signature": Webhook(secret).sign(msg_id=msg_id, timestamp=when, data=body),
        "content-type": "application/json",
        "user-agent": "pmem-webhooks",
    }


def parse_target(url: str) -> Target:
    """The URL's parts, or :class:`TargetRefused` when it is no http(s) URL with a host (a URL
    with credentials in it is refused too: they would travel in logs and pages)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise TargetRefused(f"not a URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise TargetRefused("only http and https URLs are called")
    if not parts.hostname:
        raise TargetRefused("the URL names no host")
    if parts.username or parts.password:
        raise TargetRefused("the URL must not carry a user or password")
    path = parts.path or "/"
    if parts.query:
        path = f"{path}?{parts.query}"
    return Target(scheme=scheme, host=parts.hostname, port=port or SCHEMES[scheme], path=path)


def refused_address(address: IPAddress, *, allow_private: bool) -> str | None:
    """Why a webhook must not connect to ``address`` (None: it may).

    Only global unicast addresses are called; with ``allow_private`` (a test or a closed
    network) any unicast address is. An IPv4 address written as IPv6 (``::ffff:a.b.c.d``)
    is judged as the IPv4 address it is."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_unspecified:
        return "unspecified address"
    if address.is_multicast:
        return "multicast address"
    if allow_private:
        return None
    for flag, reason in (("is_loopback", "loopback"), ("is_link_local", "link-local"),
                         ("is_private", "private"), ("is_reserved", "reserved")):
        if getattr(address, flag):
            return f"{reason} address"
    if not address.is_global:
        return "non-global address"
    return None


def clean_ops(ops: list[str] | tuple[str, ...] | None) -> list[str]:
    """An endpoint's ``ops`` filter, checked (``ValueError`` names an unknown op); empty:
    every event."""
    wanted = sorted({op.strip().lower() for op in ops or () if op.strip()})
    unknown = [op for op in wanted if op not in EVENT_OPS]
    if unknown:
        raise ValueError(f"unknown op(s) {', '.join(unknown)}; known: {', '.join(EVENT_OPS)}")
    return wanted


def backoff_seconds(failures: int, *, base: float, cap: float) -> float:
    """The wait before the next attempt after ``failures`` failed ones in a row: doubling
    from ``base``, at most ``cap``."""
    return min(cap, base * 2 ** min(max(failures - 1, 0), 30))


__all__ = ["EVENT_FIELDS", "EVENT_OPS", "event_json", "SECRET_PREFIX", "clean_ops", "Target", "TargetRefused", "backoff_seconds", "event_body",
           "new_secret", "parse_target", "refused_address", "signed_headers", "webhook_id"]
