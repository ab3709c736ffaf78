"""Display helpers: status badges that carry their text (colour is never the only cue)."""

from __future__ import annotations

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from memory.domain import CellStatus, EvidenceState, Status

register = template.Library()

#: Statuses of versions (SPEC §2) and of cells and observations, each with a readable word.
KNOWN = {s.value for s in (*Status, *CellStatus, *EvidenceState)}


@register.simple_tag
def badge(status: str | None) -> SafeString:
    word = status or "empty"
    css = word if word in KNOWN else "other"
    return format_html('<span class="badge badge-{}">{}</span>', css, word)
