"""Two versions of a key side by side, the words that changed marked."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from explorer.access import namespace_access
from explorer.http import id_param, page_context
from explorer.pages.cell import load_cell
from memory.domain import HEAD_STATUSES, Status
from memory.domain.textdiff import word_diff
from memory.selectors.versions import diff_choices, version_by_name, version_side

if TYPE_CHECKING:  # the explorer reads through memory.selectors; the model is a type here
    from memory.models import Version


def _role(version: Version) -> str:
    if version.status in HEAD_STATUSES:
        return "Current value"
    if version.status == Status.ALTERNATIVE:
        return "Competing value"
    return ""


def _labels(left: Version, right: Version) -> tuple[str, str]:
    """Each side by its role (the current value, a competing one), else by its place."""
    earlier, later = ("Earlier", "Later") if left.ordinal < right.ordinal else ("Later", "Earlier")
    return _role(left) or earlier, _role(right) or later


@login_required
@require_GET
def diff(request: HttpRequest, ns: str, key: str) -> HttpResponse:
    """Any two versions of ``key`` side by side (``?a=&b=``, version ids; default: the head
    and the version before it)."""
    access = namespace_access(request.user, ns)
    cell = load_cell(access, key)
    choices = diff_choices(namespace=access.namespace, key=cell.key)
    # A version typed as vN (any of the key's, beyond the newest the menus list) wins over
    # the menu's choice; a bare number is a version id, as links write it.
    a = version_by_name(cell, request.GET.get("a_v", "")) or id_param(request.GET.get("a", ""))
    b = version_by_name(cell, request.GET.get("b_v", "")) or id_param(request.GET.get("b", ""))
    if a is None and b is None and len(choices) >= 2:
        b, a = choices[0]["id"], choices[1]["id"]
    left = version_side(namespace=access.namespace, key=cell.key, version_id=a) if a else None
    right = version_side(namespace=access.namespace, key=cell.key, version_id=b) if b else None
    missing = [name for name, want, got in (("a", a, left), ("b", b, right)) if want and not got]
    for side in (left, right):  # a version beyond the menus' newest is still named in them
        if side and all(c["id"] != side["version"].pk for c in choices):
            v = side["version"]
            choices.append({"id": v.pk, "ordinal": v.ordinal, "status": v.status,
                            "value_head": v.value[:60]})
    # A contest (the current value against a competing one) is no "before and after": the
    # words that differ are marked on both sides alike, nothing struck through.
    contest = bool(left and right and {left["version"].status, right["version"].status}
                   & {Status.ALTERNATIVE})
    if left and right:
        left["segments"], right["segments"] = word_diff(left["version"].value,
                                                        right["version"].value)
        left["label"], right["label"] = _labels(left["version"], right["version"])
    context = {**page_context(access, "frontier"), "key": cell.key, "choices": choices, "a": a,
               "b": b, "left": left, "right": right, "missing": missing, "contest": contest,
               "same": bool(left and right and left["version"].value == right["version"].value)}
    return render(request, "explorer/diff.html", context, status=404 if missing else 200)
