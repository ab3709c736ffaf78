"""Display helpers: status badges that carry their text (colour is never the only cue), times
with their year and zone, long values clamped."""

from __future__ import annotations

from datetime import UTC, datetime

from django import template
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.timesince import timesince

from memory.domain import CellStatus, EvidenceState, Status
from memory.domain.wording import op_sentence

register = template.Library()

#: Statuses of versions (SPEC §2) and of cells and observations, each with a readable word.
KNOWN = {s.value for s in (*Status, *CellStatus, *EvidenceState)} | {
    # what a line of a raw read stands for now (the read comparison's marks)
    "current", "retracted", "retraction", "rejection"}


@register.simple_tag
def badge(status: str | None) -> SafeString:
    word = status or "empty"
    css = word if word in KNOWN else "other"
    return format_html('<span class="badge badge-{}">{}</span>', css, word)


def utc_text(moment: datetime, timespec: str = "auto") -> tuple[str, str]:
    """A moment as the server writes it, in UTC: ``(ISO 8601, "2026-12-01 14:03:05")``. Every
    time a page shows is written here (the ``when`` tag, the history table's rows) and turned
    into the reader's local time by dates.js, with UTC kept on hover."""
    utc = moment.astimezone(UTC)
    return utc.isoformat(timespec=timespec), utc.strftime("%Y-%m-%d %H:%M:%S")


@register.simple_tag
def when(moment: datetime | None, relative: bool = False) -> SafeString:
    """A moment with its year and zone: UTC from the server (``2026-12-01 14:03 UTC``), turned
    into the reader's local time by dates.js, with UTC kept on hover (the title)."""
    if moment is None:
        return format_html('<span class="muted">—</span>')
    iso, text = utc_text(moment, timespec="seconds")
    ago = format_html(' <span class="ago">({})</span>', _ago(moment)) if relative else ""
    return format_html('<time datetime="{}" title="{} UTC" data-local>{} UTC</time>{}',
                       iso.replace("+00:00", "Z"), text, text[:16], ago)


def _ago(moment: datetime) -> str:
    since = timesince(moment).split(",")[0]
    return "just now" if since.startswith("0\xa0") else f"{since} ago"


#: The glossary's entry for each operation's name.
_GLOSSARY = {"revoke": "retract"}


@register.simple_tag
def op_words(op: str, value: str | None, requested: str = "") -> SafeString:
    """An operation as a sentence, its technical name beside it (on hover too) and linked to
    the glossary's entry."""
    return format_html(
        '<span class="op-words" title="operation: {}">{}</span> <a class="op op-{}" href="{}#{}"'
        ' title="What “{}” means, in the glossary">{}</a>', op,
        op_sentence(op, value[:80] if value else value, requested), op,
        reverse("explorer:glossary"), _GLOSSARY.get(op, op), op, op)
