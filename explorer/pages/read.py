"""Compare read modes: one query read in every mode of :data:`memory.reads.READ_MODES`, side by
side, each mode in a sentence and each line with the cells it stands for now."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from explorer.access import namespace_access
from explorer.forms import ReadForm
from explorer.http import page_context
from memory.domain.readmodes import AGENT_MODE
from memory.reads import READ_MODES, read
from memory.selectors.observations import evidence_effects

if TYPE_CHECKING:  # the explorer reads through memory.selectors; the model is a type here
    from memory.models import Namespace

log = logging.getLogger("pmem.explorer")


def _read_lines(mode: str, items: list[dict[str, Any]],
                effects: dict[int, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """A result's lines, each with its cell links: a frontier line names its key; an
    observation line names the keys it stands for now, with a mark (current, superseded,
    retracted, …); a chat session's, the messages that matched."""
    if READ_MODES[mode].spec.reads_cells:
        return [{"text": i.get("line", ""), "marks": [{"key": i["key"], "mark": i["status"]}]}
                for i in items]
    return [{"text": i.get("text", ""), "evidence": i["id"], "seq": i.get("seq"),
             "marks": effects.get(i["id"], []), "parts": _score_parts(i),
             # a chat session's item (evidence): the messages that matched, each with its parts
             "turns": [{"text": m["line"], "parts": _score_parts(m)}
                       for m in i.get("messages", [])]} for i in items]


def _score_parts(item: dict[str, Any]) -> str:
    """What a fused score is made of (the evidence read), in words; empty for one score."""
    if "lexical_score" not in item:
        return ""
    meaning = item.get("semantic_score")
    return (f"score {item['score']:.2f}: meaning "
            f"{'not embedded yet' if meaning is None else f'{meaning:.2f}'}"
            f", words {item['lexical_score']:.2f}")


def read_all(namespace: Namespace, query: str, k: int | None,
             disclose: list[str]) -> list[dict[str, Any]]:
    """One query in every read mode. A mode that fails (an unreachable embedding or model
    endpoint) shows its error in its own column instead of taking down the comparison."""
    results = []
    for mode in READ_MODES.values():
        entry: dict[str, Any] = {
            "mode": mode.name, "title": mode.title, "help": mode.help,
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
    ids = sorted({i["id"] for r in results if not READ_MODES[r["mode"]].spec.reads_cells
                  for i in r["items"] if "id" in i})
    effects = evidence_effects(ids)
    for r in results:
        r["lines"] = _read_lines(r["mode"], r["items"], effects)
    return results


@login_required
@require_GET
def read_compare(request: HttpRequest, ns: str) -> HttpResponse:
    access = namespace_access(request.user, ns)
    form = ReadForm(request.GET if "q" in request.GET else None)
    results: list[dict[str, Any]] = []
    if form.is_bound and form.is_valid():
        results = read_all(access.namespace, form.cleaned_data["q"], form.cleaned_data["k"],
                           form.cleaned_data["disclose"])
    modes = [{"name": m.name, "title": m.title, "help": m.help,
              "agent": m.name == AGENT_MODE} for m in READ_MODES.values()]
    # A query the form refuses (a k of "abc", an unknown disclosure) is a 400 naming it.
    return render(request, "explorer/read.html",
                  {**page_context(access, "read"), "form": form, "results": results,
                   "modes": modes}, status=400 if form.is_bound and form.errors else 200)
