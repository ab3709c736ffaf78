"""The change feed's vocabulary (SPEC §12): the NOTIFY channel a commit announces its events
on, the op of the event an erase leaves, the feed's paging bounds, and how a subscriber
rebuilds the frontier from the events (:func:`replay`, the feed's own definition of being
complete). Pure Python."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: The PostgreSQL NOTIFY channel: payload ``"<namespace id>:<last cursor>"``, delivered when
#: the commit that wrote the events commits (a long poll and a stream listen, never poll).
CHANGES_CHANNEL = "pmem_changes"
#: The op of the one event an erase leaves in the feed (its key, nothing else).
ERASE = "erase"
#: ``limit`` of a feed page: the default and the most one page holds.
PAGE_DEFAULT = 100
PAGE_MAX = 1000
#: The longest ``wait`` a long poll may ask for, in seconds.
WAIT_MAX = 60


def replay(events: Iterable[Mapping[str, Any]]) -> dict[str, tuple[str, str]]:
    """The frontier a subscriber holds after applying ``events`` in cursor order: each key
    with a head -> (its value, the cell's status). Each event carries the head after it
    (``head``) and the cell's status, so applying one is a replace; an ``erase`` drops its
    key, as does a cell left empty."""
    out: dict[str, tuple[str, str]] = {}
    for event in events:
        key = event["key"]
        head = event.get("head")
        if event["op"] == ERASE or head is None or event.get("cell_status") == "empty":
            out.pop(key, None)
        else:
            out[key] = (head["value"], event["cell_status"])
    return out
