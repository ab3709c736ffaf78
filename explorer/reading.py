"""What the explorer says around its reads: the frontier table's sortable columns and the read
comparison (each mode in a sentence, each line with the cells it stands for). Presentation over
``explorer.selectors`` and ``memory.reads``; nothing here writes."""

from __future__ import annotations

import logging
from typing import Any

from explorer.selectors import evidence_effects
from memory.models import Namespace
from memory.reads import READ_MODES, read

log = logging.getLogger("pmem.explorer")

#: The frontier table's columns: (sort name or "", heading).
FRONTIER_COLUMNS = (("key", "Key"), ("value", "Current value"), ("status", "Status"),
                    ("support", "Support"), ("changed", "Last change"))


def frontier_columns(sort: str) -> list[dict[str, str]]:
    """Each column's heading, its aria-sort and the sort a click on it asks for: the first
    click sorts in the column's natural direction (keys A–Z, newest change first), the next
    reverses it."""
    natural_desc = {"support", "changed"}
    columns = []
    for name, heading in FRONTIER_COLUMNS:
        active = sort.lstrip("-") == name
        reversed_ = sort.startswith("-")
        descending = (name in natural_desc) != reversed_
        columns.append({
            "name": name, "heading": heading,
            "aria_sort": ("descending" if descending else "ascending") if active else "none",
            "next": (name if reversed_ else f"-{name}") if active else name,
        })
    return columns


#: Each read mode in one sentence, as a reviewer reads it (the agent's default first).
MODE_HELP = {
    "frontier": "One line per key with the value that holds now, ranked by meaning and by the "
                "query's exact words: what an agent reads by default (the API's and the MCP "
                "tool's mode).",
    "frontier_cosine": "The same lines ranked by meaning alone, as the paper ranks them.",
    "raw": "The observations closest in meaning to the query, as they were written, old and "
           "retracted ones included: what plain retrieval would give an agent.",
    "raw_ordered": "The same observations in the order they arrived, each tagged [t=…], so a "
                   "reader can tell which is newer.",
    "pruned": "The raw observations with those a newer one replaces taken out, decided by a "
              "language model.",
}
#: The read mode agents use unless they ask for another (API and MCP).
AGENT_MODE = "frontier"


def _read_lines(mode: str, items: list[dict[str, Any]],
                effects: dict[int, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """A result's lines, each with its cell links: a frontier line names its key; an
    observation line names the keys it stands for now, with a mark (current, superseded,
    retracted, …)."""
    if mode.startswith("frontier"):
        return [{"text": i.get("line", ""), "marks": [{"key": i["key"], "mark": i["status"]}]}
                for i in items]
    return [{"text": i.get("text", ""), "evidence": i["id"], "seq": i.get("seq"),
             "marks": effects.get(i["id"], [])} for i in items]


def read_all(namespace: Namespace, query: str, k: int | None,
              disclose: list[str]) -> list[dict[str, Any]]:
    """One query in every read mode. A mode that fails (an unreachable embedding or model
    endpoint) shows its error in its own column instead of taking down the comparison."""
    results = []
    for mode in READ_MODES.values():
        entry: dict[str, Any] = {
            "mode": mode.name, "title": mode.title, "help": MODE_HELP.get(mode.name, ""),
            "agent": mode.name == AGENT_MODE, "needs_model": mode.needs_model,
            "available": True, "context": "", "chars": 0, "items": [], "note": "", "error": ""}
        try:
            result = read(mode.name, namespace=namespace, query=query, k=k,
                          disclose=disclose)
            entry.update(context=result.context, chars=result.context_chars,
                         items=result.items, note=result.note, available=result.available)
        except Exception as exc:  # noqa: BLE001 — shown in that mode's column, logged in full
            log.exception("read mode %s failed", mode.name)
            entry["error"] = f"{type(exc).__name__}: {exc}"
        results.append(entry)
    ids = sorted({i["id"] for r in results if not r["mode"].startswith("frontier")
                  for i in r["items"] if "id" in i})
    effects = evidence_effects(ids)
    for r in results:
        r["lines"] = _read_lines(r["mode"], r["items"], effects)
    return results
