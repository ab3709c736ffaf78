"""Values brought back: which version a restore (or a contest reopened by an undo) brings back,
and the repeats a Retract → Undo → Retract → Undo cycle leaves, merged for the reader.

SPEC §3 keeps x unchanged and makes a new version that ``restores`` x; a cycle repeated leaves
one copy per undo. The reader sees each value once: the newest version of a chain names the
original ("restore of v2"), the original says where its value lives now ("restored as v6"),
and the copies in between (restores that were retracted and restored again) fold under the
newest. The restore list offers each distinct value once (:func:`merge_restorable`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from memory.domain import OpType
from memory.domain.model import normalize_value, same_value
from memory.models import Cell, Operation, Version

#: Restores of one key read at once to link a page's versions (a key restored more often than
#: this links its newest restores only; nothing else changes).
LINKS_MAX = 2000


def back_links(cell: Cell) -> dict[int, int]:
    """``new version id -> the version id it brings back``: restores (the ``restores`` edge)
    and the alternatives an undone resolution reopened (``payload.reopens``)."""
    links = dict(Version.objects.filter(cell=cell, restores_id__isnull=False)
                 .order_by("-id").values_list("id", "restores_id")[:LINKS_MAX])
    for version_id, original in (Operation.objects
                                 .filter(cell=cell, type=OpType.CONTEST,
                                         payload__has_key="reopens", version_id__isnull=False)
                                 .order_by("-id").values_list("version_id", "payload__reopens")
                                 [:LINKS_MAX]):
        if isinstance(original, int):
            links.setdefault(version_id, original)
    return links


def _root(links: dict[int, int], version_id: int) -> int:
    seen = {version_id}
    while version_id in links and links[version_id] not in seen:
        version_id = links[version_id]
        seen.add(version_id)
    return version_id


def restore_notes(cell: Cell, ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """For each version named that takes part in a chain: ``restores`` (the original's
    ordinal, on a copy), ``reopens`` (True when an undone resolution brought it back),
    ``restored_as`` (the ordinal of the chain's newest version, on the original) and ``folded``
    (a copy in between, shown under the newest), ``copies`` (the folded ordinals, on the
    newest). Two statements plus one for the ordinals."""
    links = back_links(cell)
    if not links:
        return {}
    chains: dict[int, list[int]] = {}
    for new in links:
        chains.setdefault(_root(links, new), []).append(new)
    wanted = set(ids)
    named = {i for root, members in chains.items() if wanted & {root, *members}
             for i in (root, *members)}
    ordinals = dict(Version.objects.filter(pk__in=named).values_list("id", "ordinal"))
    reopened = set(Operation.objects.filter(cell=cell, payload__has_key="reopens",
                                            version_id__in=named)
                   .values_list("version_id", flat=True))
    notes: dict[int, dict[str, Any]] = {}
    for root, members in chains.items():
        if not wanted & {root, *members} or root not in ordinals:
            continue
        newest, *older = sorted(members, reverse=True)
        notes[root] = {"restored_as": ordinals.get(newest)}
        notes[newest] = {"restores": ordinals[root], "reopens": newest in reopened,
                         "copies": sorted(ordinals[m] for m in older if m in ordinals)}
        for member in older:
            notes[member] = {"restores": ordinals[root], "reopens": member in reopened,
                             "folded": True, "under": ordinals.get(newest)}
    return {i: n for i, n in notes.items() if i in wanted}


def merge_restorable(rows: Sequence[dict[str, Any]], head_value: str | None
                     ) -> list[dict[str, Any]]:
    """The restore list, one entry per distinct value, where its newest copy stands: the
    entry restores the oldest version holding it (the original, whose evidence every copy
    carries) and names the others in ``also``; a value equal to the head's is left out
    (restoring it would only add support)."""
    merged: dict[str, dict[str, Any]] = {}
    for row in rows:  # newest first
        if head_value is not None and same_value(row["value"], head_value):
            continue
        key = normalize_value(row["value"])
        if key in merged:
            also = [*merged[key]["also"], merged[key]["ordinal"]]
            merged[key] = {**row, "also": sorted(also)}
        else:
            merged[key] = {**row, "also": []}
    return list(merged.values())
