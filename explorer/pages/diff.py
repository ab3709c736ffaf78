"""Two versions of a key side by side, the words that changed marked; each found by its vN
or by words of its value, among all of the key's versions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from explorer.access import namespace_access
from explorer.http import id_param, page_context
from explorer.pages.cell import load_cell
from memory.domain import HEAD_STATUSES, BadParameter, Status
from memory.domain.textdiff import word_diff
from memory.selectors.history import cursor_for, history_page
from memory.selectors.versions import version_by_name, version_side

if TYPE_CHECKING:  # the explorer reads through memory.selectors; the model is a type here
    from memory.models import Cell, Version

#: Versions the picker suggests at a time (the newest, or the newest that match the words).
SUGGESTIONS = 12
SEARCH_CHARS = 200


def suggestions(cell: Cell, text: str) -> list[dict[str, Any]]:
    """The versions a picker offers for ``text``: the one ``vN`` names, else the newest whose
    value holds the words (the history's indexed search, at any length of history), else the
    newest versions."""
    text = text.strip()[:SEARCH_CHARS]
    try:
        if text and version_by_name(cell, text) is not None:
            ordinal = int(text.lower().removeprefix("v"))
            page = history_page(cell, before=cursor_for(cell, ordinal + 1), limit=1)
        else:
            page = history_page(cell, limit=SUGGESTIONS, search=text or None)
    except BadParameter:
        return []
    return [e.as_dict() for e in page.entries]


def _pick(cell: Cell, text: str) -> tuple[int | None, bool]:
    """The version typed into a picker (``vN``, or words of its value: the newest that holds
    them) and whether something was typed."""
    text = text.strip()[:SEARCH_CHARS]
    if not text:
        return None, False
    found = version_by_name(cell, text)
    if found is None:
        rows = suggestions(cell, text)
        found = rows[0]["version"] if rows else None
    return found, True


def _role(version: Version) -> str:
    if version.status in HEAD_STATUSES:
        return "Current value"
    if version.status == Status.ALTERNATIVE:
        return "Challenger"
    return ""


def _labels(left: Version, right: Version) -> tuple[str, str]:
    """Each side by its role (the current value, a challenger), else by its place."""
    earlier, later = ("Earlier", "Later") if left.ordinal < right.ordinal else ("Later", "Earlier")
    return _role(left) or earlier, _role(right) or later


@login_required
@require_GET
def diff(request: HttpRequest, ns: str, key: str) -> HttpResponse:
    """Any two versions of ``key`` side by side: ``a_v``/``b_v`` as typed into the pickers
    (vN or words of the value), else ``a``/``b`` (version ids, as links write them); default
    the newest and the version before it. A contest shows the current value, then the
    challenger."""
    access = namespace_access(request.user, ns)
    cell = load_cell(access, key)
    # A version typed into a picker (vN or words of its value, any of the key's) wins over
    # an id in the link (``a``/``b``, as the queue and the history write them).
    a, a_typed = _pick(cell, request.GET.get("a_v", ""))
    b, b_typed = _pick(cell, request.GET.get("b_v", ""))
    a = a if a_typed else id_param(request.GET.get("a", ""))
    b = b if b_typed else id_param(request.GET.get("b", ""))
    newest = suggestions(cell, "")
    if a is None and b is None and not (a_typed or b_typed) and len(newest) >= 2:
        b, a = newest[0]["version"], newest[1]["version"]
    left = version_side(namespace=access.namespace, key=cell.key, version_id=a) if a else None
    right = version_side(namespace=access.namespace, key=cell.key, version_id=b) if b else None
    missing = [request.GET.get(f"{name}_v", "").strip()[:SEARCH_CHARS] or f"id {want}"
               for name, want, got, typed in (("a", a, left, a_typed), ("b", b, right, b_typed))
               if (want or typed) and not got]
    # A contest reads current value first, challenger second, whichever order the link named.
    if left and right and right["version"].status in HEAD_STATUSES \
            and left["version"].status == Status.ALTERNATIVE:
        left, right = right, left
    # A contest (the current value against a competing one) is no "before and after": the
    # words that differ are marked on both sides alike, nothing struck through.
    contest = bool(left and right and {left["version"].status, right["version"].status}
                   & {Status.ALTERNATIVE})
    if left and right:
        left["segments"], right["segments"] = word_diff(left["version"].value,
                                                        right["version"].value)
        left["label"], right["label"] = _labels(left["version"], right["version"])
    context = {**page_context(access, "frontier"), "key": cell.key, "choices": newest,
               "pickers": [("a", left, "First version"), ("b", right, "Second version")],
               "left": left, "right": right, "missing": missing, "contest": contest,
               "same": bool(left and right and left["version"].value == right["version"].value)}
    return render(request, "explorer/diff.html", context, status=404 if missing else 200)


@login_required
@require_GET
def diff_versions(request: HttpRequest, ns: str, key: str) -> HttpResponse:
    """A picker's suggestions as ``<option>`` elements: what ``a_v`` (or ``b_v``) names."""
    access = namespace_access(request.user, ns)
    cell = load_cell(access, key)
    text = request.GET.get("a_v", request.GET.get("b_v", ""))
    return render(request, "explorer/partials/diff_options.html",
                  {"choices": suggestions(cell, text)})
