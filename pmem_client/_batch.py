"""What a batch of observations is on the wire, without I/O: each item as the API takes it
(with an idempotency key of its own, so a retried or resent batch stores nothing twice), and
a long list cut into requests the server takes."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

#: Most observations one batch request carries (the server's limit) ...
BATCH_ITEMS = 1000
#: ... and about how many bytes of JSON (the server refuses a body over 1 MB by default).
BATCH_BYTES = 900_000
ITEM_FIELDS = frozenset({"text", "messages", "facts", "source", "observed_at",
                         "idempotency_key"})


def new_idempotency_key() -> str:
    return f"pmem-client-{uuid.uuid4().hex}"


def instant(value: str | datetime) -> str:
    """A time as the API takes it: ISO 8601, which must name its zone."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("a time needs a time zone")
        return value.isoformat()
    return value


def messages_body(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A session's turns as the API takes them: an ``at`` given as a datetime in ISO 8601."""
    return [{**m, "at": instant(m["at"])} if isinstance(m.get("at"), datetime) else dict(m)
            for m in messages]


def batch_item(item: dict[str, Any]) -> dict[str, Any]:
    """One observation of a batch as the API takes it, with an idempotency key of its own
    when it has none."""
    unknown = set(item) - ITEM_FIELDS
    if unknown:
        raise ValueError(f"an observation takes {sorted(ITEM_FIELDS)}, not {sorted(unknown)}")
    body = {k: v for k, v in item.items() if v is not None}
    if isinstance(body.get("observed_at"), datetime):
        body["observed_at"] = instant(body["observed_at"])
    if body.get("messages") is not None:
        body["messages"] = messages_body(body["messages"])
    body.setdefault("idempotency_key", new_idempotency_key())
    return body


def batches(items: list[dict[str, Any]], size: int = BATCH_ITEMS,
            max_bytes: int = BATCH_BYTES) -> list[list[dict[str, Any]]]:
    """``items`` (already :func:`batch_item` s) cut into requests, in order: at most
    ``size`` observations and about ``max_bytes`` of JSON each (one larger item alone)."""
    out: list[list[dict[str, Any]]] = [[]]
    used = 0
    for item in items:
        weight = len(json.dumps(item, ensure_ascii=False).encode()) + 1
        if out[-1] and (len(out[-1]) >= size or used + weight > max_bytes):
            out.append([])
            used = 0
        out[-1].append(item)
        used += weight
    return [chunk for chunk in out if chunk]
