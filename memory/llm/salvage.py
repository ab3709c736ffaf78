"""Reading a model's JSON answer tolerantly: ``<think>`` blocks, code fences, prose around the
value, and an answer cut off by a length limit inside its list."""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"^\s*```[\w-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)


def parse_json_loose(raw: str) -> Any:
    """Parse a model's JSON answer: strip ``<think>`` blocks and code fences, try the whole
    text, then the first ``{...}`` or ``[...]`` block in it, or what of it came back whole
    (:func:`salvage_truncated`). Raises ValueError if none parses."""
    text = _THINK.sub("", raw).strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    if not text:
        raise ValueError("empty answer")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    decoder = json.JSONDecoder()
    starts = sorted(i for i in (text.find("{"), text.find("[")) if i >= 0)
    for start in starts:
        try:
            return decoder.raw_decode(text, start)[0]
        except json.JSONDecodeError:
            salvaged = salvage_truncated(text[start:])  # cut off by a length limit?
            if salvaged is not None:
                return salvaged
    raise ValueError(f"no JSON value in {text[:80]!r}")


def salvage_truncated(text: str) -> Any | None:
    """The complete objects of an answer cut off inside its list (a length limit hit):
    ``{"facts": [{...}, {...}, {"key": "ab`` gives ``{"facts": [{...}, {...}]}``, a bare
    ``[{...}, {"k`` the list. None when no complete object precedes the cut. One left-to-right
    pass of the JSON decoder: nothing backtracks."""
    bracket = text.find("[")
    if bracket < 0:
        return None
    head = text[:bracket].strip()
    name = None
    if head:  # '{"facts":' — the one member the list belongs to
        if not (head.startswith("{") and head.endswith(":")):
            return None
        try:
            name = json.loads(head[1:-1].strip())
        except json.JSONDecodeError:
            return None
        if not isinstance(name, str):
            return None
    decoder, items, i = json.JSONDecoder(), [], bracket + 1
    while True:
        while i < len(text) and text[i] in " \t\r\n,":
            i += 1
        if i >= len(text) or text[i] != "{":
            break
        try:
            item, i = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            break
        items.append(item)
    if not items:
        return None
    return items if name is None else {name: items}
