"""Links into the past (SPEC §9): "memory as of just before / just after" an operation."""

from __future__ import annotations

from datetime import datetime
from urllib.parse import urlencode

from django import template
from django.urls import reverse

from explorer.http import as_of_param
from memory.selectors.timeline import TICK

register = template.Library()


@register.simple_tag
def asof_url(ns: str, moment: datetime | None, side: str = "after", key: str = "",
             has_cell: bool = True) -> str:
    """The explorer page of ``key`` (the frontier without a key, or when the key's cell is
    gone) as of just ``side`` ``moment``."""
    if moment is None:
        return ""
    at = moment - TICK if side == "before" else moment
    path = (reverse("explorer:cell", args=[ns, key]) if key and has_cell
            else reverse("explorer:frontier", args=[ns]))
    return f"{path}?{urlencode({'as_of': as_of_param(at)})}"
