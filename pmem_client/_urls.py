"""The API's paths and query parameters as the client writes them (no I/O)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

API = "api/v1/"

# --- URLs --------------------------------------------------------------------------------------


def ns_path(namespace: str) -> str:
    return f"{API}namespaces/{quote(namespace, safe='')}/"


def cell_path(namespace: str, key: str) -> str:
    return f"{ns_path(namespace)}cells/{quote(key, safe='')}/"


def rebase(url: str, base_url: str) -> str:
    """A ``next`` link the server built, pointed at the server as this client reaches it (the
    server may know itself by another host: a proxy, a container)."""
    parts, base = urlsplit(url), urlsplit(base_url)
    if not parts.scheme:
        return url
    return urlunsplit((base.scheme, base.netloc, parts.path, parts.query, ""))


def params(**values: Any) -> dict[str, str]:
    out = {}
    for name, value in values.items():
        if value is None:
            continue
        if isinstance(value, datetime):
            if value.tzinfo is None:
                raise ValueError(f"{name} needs a time zone (as_of is an instant)")
            value = value.isoformat()
        elif isinstance(value, bool):
            value = "1" if value else "0"
        out[name] = str(value)
    return out


def as_of_text(value: str | datetime | None) -> str | None:
    if isinstance(value, datetime):
        return params(as_of=value)["as_of"]
    return value
