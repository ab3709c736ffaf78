"""How an operation's effects are written into its log row (``payload["effects"]``) and read
back: the one encoding of :data:`memory.domain.model.Effect` as data.

An effect is stored under a stable name (:data:`EFFECT_NAMES`), with its fields; the operation
carries the encoding's format number (``payload["effects_format"]``; not "version", which names
a cell's version throughout the payload). The names are data, not code: stored operations,
exports (docs/export-format.md) and migration 0010 read them, so a class may be renamed, its
name here never. A change to what a stored effect holds is a new :data:`EFFECTS_FORMAT`, and
:func:`logged_effects` reads every format written so far (operations logged before the number
was written are format 1). Pure Python.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from .model import Effect, LinkSupersedes, NewVersion, Reinstate, Retype, Support, Tombstone
from .vocabulary import Status

#: The format of the encoding :func:`effects_record` writes.
EFFECTS_FORMAT = 1
#: The stored name of each effect.
EFFECT_NAMES: Mapping[type, str] = {
    NewVersion: "NewVersion", Retype: "Retype", LinkSupersedes: "LinkSupersedes",
    Support: "Support", Tombstone: "Tombstone", Reinstate: "Reinstate",
}
RETYPE = EFFECT_NAMES[Retype]


def effects_record(effects: Iterable[Effect], ids: Callable[[int], int | None]
                   ) -> dict[str, Any]:
    """The payload entries of an operation's effects: ``effects`` (each its name and fields,
    the version ids it names passed through ``ids``, statuses as their words) and
    ``effects_format``."""
    out: list[dict[str, Any]] = []
    for effect in effects:
        row: dict[str, Any] = {"effect": EFFECT_NAMES[type(effect)]}
        for f in fields(effect):
            value = getattr(effect, f.name)
            if f.name.endswith("id") and value is not None:
                value = ids(value)
            row[f.name] = str(value) if isinstance(value, Status) else value
        out.append(row)
    return {"effects": out, "effects_format": EFFECTS_FORMAT}


@dataclass(frozen=True)
class LoggedEffect:
    """An effect as an operation logged it: its stored name and the version and status it
    names (None where it names none)."""

    name: str
    version_id: int | None
    status: str | None


def logged_effects(payload: Mapping[str, Any]) -> list[LoggedEffect]:
    """The effects an operation's payload logged, whatever format wrote them; entries that
    are not effects (a hand-edited or foreign payload) are skipped."""
    rows = payload.get("effects")
    if not isinstance(rows, list):
        return []
    out = []
    for row in rows:
        if not isinstance(row, Mapping) or not isinstance(row.get("effect"), str):
            continue
        version_id = row.get("version_id")
        out.append(LoggedEffect(
            row["effect"],
            version_id if isinstance(version_id, int) and not isinstance(version_id, bool)
            else None,
            str(row["status"]) if row.get("status") is not None else None))
    return out
