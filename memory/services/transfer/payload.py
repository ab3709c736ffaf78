"""The ids inside an operation's payload, and the reasons that quote them, rewritten to the importing instance's ids.

The writer logs an operation's payload with stored ids (``memory.services.writer._payload``):
the version it named (``version``), the heads before and after (``head_before``,
``head_after``), its effects (every ``*_id`` of an effect is a version), and, for a rollback's
reinstate row and an undo, the operation that caused it (``cause``, ``undoes``). The reason the
service wrote on those rows quotes that operation ("rollback after operation 12", "undo of
operation 12"). A move gives every row a new id, so all of these are rewritten with the rest;
a person's own words are never touched (only a reason exactly as the service writes it is).

A client's facts may name a version too (``version`` of a fact, as sent, and as extracted):
rewritten when it names a version of the file, kept as sent otherwise (it named none then).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

#: Payload members that name a version / an operation.
VERSION_KEYS = ("version", "head_before", "head_after")
OPERATION_KEYS = ("cause", "undoes")
#: The reasons the service writes that quote the operation behind a row.
QUOTED = {"cause": "rollback after operation {}", "undoes": "undo of operation {}"}

#: (record type, id) -> the new id. Raises KeyError for an id the file does not hold.
Mapper = Callable[[str, int], int]


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def payload_refs(payload: dict[str, Any]) -> Iterator[tuple[str, int]]:
    """Every (record type, id) a payload names."""
    for name in VERSION_KEYS:
        if _is_id(payload.get(name)):
            yield "version", payload[name]
    for name in OPERATION_KEYS:
        if _is_id(payload.get(name)):
            yield "operation", payload[name]
    effects = payload.get("effects")
    if isinstance(effects, list):
        for effect in effects:
            if isinstance(effect, dict):
                for name, value in effect.items():
                    if name.endswith("id") and _is_id(value):
                        yield "version", value


def remap_payload(payload: dict[str, Any], new: Mapper) -> dict[str, Any]:
    """The payload with every id it names replaced by ``new``'s."""
    out = dict(payload)
    for name in VERSION_KEYS:
        if _is_id(out.get(name)):
            out[name] = new("version", out[name])
    for name in OPERATION_KEYS:
        if _is_id(out.get(name)):
            out[name] = new("operation", out[name])
    effects = out.get("effects")
    if isinstance(effects, list):
        out["effects"] = [
            {k: new("version", v) if k.endswith("id") and _is_id(v) else v
             for k, v in effect.items()} if isinstance(effect, dict) else effect
            for effect in effects]
    return out


def remap_reason(reason: str, old: dict[str, Any], new: dict[str, Any]) -> str:
    """The service's own reason quoting the operation behind the row, with its new id."""
    for name, template in QUOTED.items():
        if _is_id(old.get(name)) and reason == template.format(old[name]):
            return template.format(new[name])
    return reason


def remap_facts(facts: Any, known: Callable[[int], int | None]) -> Any:
    """Facts (a list of objects) with each ``version`` the file holds renumbered."""
    if not isinstance(facts, list):
        return facts
    out = []
    for fact in facts:
        if isinstance(fact, dict) and _is_id(fact.get("version")):
            mapped = known(fact["version"])
            if mapped is not None:
                fact = {**fact, "version": mapped}
        out.append(fact)
    return out


def remap_extracted(extracted: Any, known: Callable[[int], int | None]) -> Any:
    if isinstance(extracted, dict) and isinstance(extracted.get("facts"), list):
        return {**extracted, "facts": remap_facts(extracted["facts"], known)}
    return extracted
