"""Two versions of a key side by side, the words that changed marked."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from explorer.access import namespace_access
from explorer.http import id_param, page_context
from explorer.pages.cell import load_cell
from memory.domain.textdiff import word_diff
from memory.selectors import diff_choices, version_side


@login_required
@require_GET
def diff(request: HttpRequest, ns: str, key: str) -> HttpResponse:
    """Any two versions of ``key`` side by side (``?a=&b=``, version ids; default: the head
    and the version before it)."""
    access = namespace_access(request.user, ns)
    cell = load_cell(access, key)
    choices = diff_choices(namespace=access.namespace, key=cell.key)
    a, b = id_param(request.GET.get("a", "")), id_param(request.GET.get("b", ""))
    if a is None and b is None and len(choices) >= 2:
        b, a = choices[0]["id"], choices[1]["id"]
    left = version_side(namespace=access.namespace, key=cell.key, version_id=a) if a else None
    right = version_side(namespace=access.namespace, key=cell.key, version_id=b) if b else None
    missing = [name for name, want, got in (("a", a, left), ("b", b, right)) if want and not got]
    if left and right:
        left["segments"], right["segments"] = word_diff(left["version"].value,
                                                        right["version"].value)
    context = {**page_context(access, "frontier"), "key": cell.key, "choices": choices, "a": a,
               "b": b, "left": left, "right": right, "missing": missing,
               "same": bool(left and right and left["version"].value == right["version"].value)}
    return render(request, "explorer/diff.html", context, status=404 if missing else 200)
