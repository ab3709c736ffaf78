"""What every answer that names a version by id says beside it: its ``ordinal`` (the ``vN`` the
explorer shows: its position in the key's history) and, where the object is the version's
own — a cell's head, an alternative, a history entry, a read item, a graph's version node —
its ``metadata`` and ``expires_at`` (SPEC §13). One statement per answer
(:func:`memory.selectors.versions.version_details`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from memory.selectors.versions import version_details


def _version_id(obj: dict[str, Any]) -> int | None:
    vid = obj.get("version")
    return vid if isinstance(vid, int) and not isinstance(vid, bool) else None


def attach(versions: Iterable[dict[str, Any]] = (),
           references: Iterable[dict[str, Any]] = ()) -> None:
    """Add ``ordinal``, ``metadata`` and ``expires_at`` to each of ``versions`` (objects describing the
    version they name) and ``ordinal`` to each of ``references`` (objects that only point at
    one: operations), in place. Objects naming no version get ``ordinal: null`` (and
    ``metadata`` and ``expires_at`` null)."""
    versions, references = list(versions), list(references)
    details = version_details(_version_id(o) for o in versions + references)
    for obj in versions:
        found = details.get(_version_id(obj) or 0)
        obj["ordinal"] = found[0] if found else obj.get("ordinal")
        obj["metadata"] = found[1] if found else None
        obj["expires_at"] = found[2] if found else None
    for obj in references:
        found = details.get(_version_id(obj) or 0)
        obj["ordinal"] = found[0] if found else None


def cell_parts(cell: dict[str, Any]) -> list[dict[str, Any]]:
    """A cell answer's version-like objects: the cell (its head), alternatives, history."""
    return [cell, *(cell.get("alternatives") or []), *(cell.get("history") or [])]


def attach_cells(cells: Iterable[dict[str, Any]]) -> None:
    attach([part for cell in cells for part in cell_parts(cell)])


def attach_graph(graph: dict[str, Any]) -> None:
    nodes = graph.get("nodes") or []
    attach([n for n in nodes if n.get("kind") == "version"],
           [n for n in nodes if n.get("kind") == "operation"])
