"""Materialization (SPEC §7): one deterministic, query-independent line per cell."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .vocabulary import CellStatus


@dataclass(frozen=True)
class ClosedVersion:
    value: str
    status: str


@dataclass(frozen=True)
class CellText:
    key: str
    value: str | None
    status: str  # a CellStatus
    support: int = 0
    sources: tuple[str, ...] = ()
    alternatives: tuple[str, ...] = ()
    history: tuple[ClosedVersion, ...] = field(default=())  # newest first


def embedding_text(key: str, value: str) -> str:
    """What a cell is embedded as for the frontier read: ``key: value``."""
    return f"{key}: {value}"


def key_text(key: str) -> str:
    """What a key is embedded as for soft identity: its words."""
    return key.replace("_", " ")


def evidence_text(text: str, facts: Sequence[Mapping[str, Any]] | None) -> str:
    """What the raw reads show and embed for an observation: its text, else its facts."""
    if text.strip():
        return text.strip()
    return "; ".join(f"{f.get('key')}: {f.get('value')}" for f in (facts or [])
                     if f.get("value") is not None)


def render_cell(cell: CellText, disclose: Iterable[str] = ()) -> str:
    """``key = value`` [``(contested)``], then the requested disclosures in a fixed order."""
    wanted = set(disclose)
    line = f"{cell.key} = {cell.value}" if cell.value is not None else f"{cell.key} = (empty)"
    if cell.status == CellStatus.CONTESTED:
        line += " (contested)"
    parts = [line]
    if "support" in wanted:
        snippet = "; ".join(_snip(s) for s in cell.sources[:3])
        parts.append(f"support: {cell.support}" + (f" [{snippet}]" if snippet else ""))
    if "alternatives" in wanted and cell.alternatives:
        parts.append("alternatives: " + " | ".join(cell.alternatives))
    if "history" in wanted and cell.history:
        parts.append("history: " + " | ".join(f"{h.value} ({h.status})" for h in cell.history))
    return "; ".join(parts)


def render_context(cells: Sequence[CellText], disclose: Iterable[str] = (),
                   header: str = "Current memory (one line per key; the value shown holds now):"
                   ) -> str:
    lines = [render_cell(c, disclose) for c in cells]
    return "\n".join([header, *lines]) if lines else header


def _snip(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
