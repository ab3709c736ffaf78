"""The one check every read of a namespace makes first (SPEC §13): a fact whose expiry passed
is never served as current, whether or not beat has run. The API's and the explorer's
namespace lookups call :func:`expiry_checked` before any selector reads; it expires what is
due (memory.services.expiry: one probe of a small partial index when nothing is), so every
selector after it — frontier and its rankings, cells, a cell, history, graph, as_of, export —
reads a graph in which the expired version is closed and its cell empty."""

from __future__ import annotations

from typing import TypeVar

from memory.models import Namespace
from memory.services.expiry import expire_due

N = TypeVar("N", bound=Namespace | None)


def expiry_checked(namespace: N) -> N:
    """``namespace``, its due expiries recorded (None passes through)."""
    if namespace is not None:
        expire_due(namespace_id=namespace.pk)
    return namespace
