"""Input of the explorer's actions, validated before any service is called."""

from __future__ import annotations

from datetime import UTC, timedelta
from typing import Any

from django import forms
from django.conf import settings

from memory.domain import (
    BIGINT_MAX,
    DISCLOSURES,
    LOG_TYPES,
    VALUE_OPS,
    BadParameter,
    CellStatus,
    OpType,
    Role,
)
from memory.domain.instants import parse_instant, zone_named
from memory.domain.scopes import (
    DEFAULT_SCOPE,
    MAX_BOUND_SOURCES,
    MAX_SOURCE_CHARS,
    Scope,
    clean_sources,
)
from memory.domain.webhooks import clean_ops

#: The typed operations a reviewer may ask for on the cell page (SPEC §3), as it labels them.
OPS = (
    (OpType.REVOKE.value, "Retract"),
    (OpType.REJECT.value, "Reject"),
    (OpType.RESOLVE.value, "Resolve"),
    (OpType.CONTEST.value, "Contest"),
    (OpType.ACCEPT.value, "Accept"),
)
#: What the cell page's forms may post: the actions above, and restore (the Restore buttons
#: of revoked and contradicted versions).
FORM_OPS = (*OPS, (OpType.RESTORE.value, "Restore"))
#: The frontier page's filters: every cell, a cell status, changed lately, failed observations.
FRONTIER_FILTERS = ("all", CellStatus.CONTESTED.value, CellStatus.EMPTY.value, "recent", "failed")


class OperationForm(forms.Form):
    op = forms.ChoiceField(choices=FORM_OPS)
    value = forms.CharField(required=False, strip=True, max_length=settings.PMEM_MAX_VALUE_CHARS)
    version = forms.IntegerField(required=False, min_value=1)
    # Required of every action but a restore (the undo of a retraction, which may say why).
    reason = forms.CharField(max_length=2000, strip=True, required=False)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        op = data.get("op")
        if op and op != OpType.RESTORE and not data.get("reason") and "reason" not in self.errors:
            self.add_error("reason", "Say why: the reason goes in the log.")
        if op in VALUE_OPS and not data.get("value"):
            self.add_error("value", f"{op} needs a value.")
        if op == OpType.RESOLVE and not data.get("version"):
            # Nothing is pre-selected on the page: a contest is settled by a choice.
            self.add_error("version", "Pick the winner: no value is chosen for you.")
        if op == OpType.RESTORE and not data.get("version"):
            self.add_error("version", "Name the version to restore.")
        return data


class ObservationForm(forms.Form):
    text = forms.CharField(max_length=settings.PMEM_MAX_TEXT_CHARS, strip=True,
                           widget=forms.Textarea(attrs={"rows": 2}))
    source = forms.CharField(required=False, max_length=200, strip=True)


class FrontierFilter(forms.Form):
    q = forms.CharField(required=False, max_length=200, strip=True)
    show = forms.ChoiceField(required=False, choices=[(s, s) for s in FRONTIER_FILTERS])
    sort = forms.CharField(required=False, max_length=20)  # an unknown one: the default order
    page = forms.CharField(required=False, max_length=20)

    def clean_page(self) -> int:
        """A page number; anything else (``abc``, ``0``, ``²``) is the first page, not a 400."""
        raw = self.cleaned_data.get("page") or ""
        return min(int(raw), 1_000_000) if raw.isascii() and raw.isdigit() and int(raw) else 1


class LogFilter(forms.Form):
    key = forms.CharField(required=False, max_length=settings.PMEM_MAX_KEY_CHARS, strip=True)
    key_contains = forms.CharField(required=False, max_length=settings.PMEM_MAX_KEY_CHARS,
                                   strip=True)
    op = forms.ChoiceField(required=False, choices=[("", "any")] + [(t, t) for t in LOG_TYPES])
    actor = forms.CharField(required=False, max_length=200, strip=True)
    source = forms.CharField(required=False, max_length=200, strip=True)
    before = forms.IntegerField(required=False, min_value=1, max_value=BIGINT_MAX)
    token = forms.CharField(required=False, max_length=100, strip=True)
    since = forms.CharField(required=False, max_length=64, strip=True)
    until = forms.CharField(required=False, max_length=64, strip=True)
    tz = forms.CharField(required=False, max_length=64, strip=True)

    def clean(self) -> dict[str, Any]:
        """``since``/``until``: a date-time in the browser's zone (``tz``), or with its own
        offset; a date alone is that day's start (``until``: its end)."""
        data = super().clean() or {}
        try:
            zone = zone_named(data.get("tz"))
        except BadParameter as exc:
            self.add_error("tz", exc.message)
            zone = UTC
        for name in ("since", "until"):
            raw = data.get(name) or ""
            try:
                moment = parse_instant(raw, field=name, zone=zone)
            except BadParameter as exc:
                self.add_error(name, exc.message)
                continue
            if moment is not None and name == "until" and len(raw) == 10:
                moment += timedelta(days=1) - timedelta(microseconds=1)
            data[f"{name}_at"] = moment
        return data


DISCLOSE = tuple((name, name) for name in DISCLOSURES)


class ReadForm(forms.Form):
    q = forms.CharField(max_length=2000, strip=True)
    k = forms.IntegerField(required=False, min_value=1, max_value=settings.PMEM_MAX_K)
    disclose = forms.MultipleChoiceField(required=False, choices=DISCLOSE,
                                         widget=forms.CheckboxSelectMultiple)


# --- members and tokens (admins) -------------------------------------------------------------

SCOPES = ((Scope.WRITE.value, "write — observe and read"), (Scope.READ.value, "read — reads only"),
          (Scope.REVIEW.value, "review — also human operations and erase"))
ROLES = ((Role.VIEWER.value, "viewer — sees"),
         (Role.REVIEWER.value, "reviewer — also acts on cells"),
         (Role.ADMIN.value, "admin — also manages members and tokens"))


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, strip=True,
                           help_text="Who holds it, e.g. the agent's name; signs its operations.")
    scope = forms.ChoiceField(choices=SCOPES, initial=DEFAULT_SCOPE.value)
    expires_days = forms.IntegerField(required=False, min_value=1, max_value=3650,
                                      label="Expires in days",
                                      help_text="Empty: never expires.")
    sources = forms.CharField(
        required=False, max_length=MAX_BOUND_SOURCES * (MAX_SOURCE_CHARS + 2),
        label="Sources it may claim",
        help_text="Comma-separated. A write token may name these and any source without a "
                  "trust level; one alone is what its writes claim when they name none.")

    def clean_sources(self) -> list[str]:
        try:
            return clean_sources(self.cleaned_data.get("sources", "").replace("\n", ",")
                                 .split(","))
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None


class WebhookForm(forms.Form):
    url = forms.CharField(max_length=2000, strip=True, label="URL",
                          help_text="http(s); it receives each event as a signed POST.")
    ops = forms.CharField(required=False, max_length=500, label="Ops it receives",
                          help_text="Comma-separated (e.g. accept,reject,erase). Empty: every "
                                    "event.")

    def clean_ops(self) -> list[str]:
        try:
            return clean_ops(self.cleaned_data.get("ops", "").split(","))
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None


class MemberForm(forms.Form):
    username = forms.CharField(max_length=150, strip=True)
    role = forms.ChoiceField(choices=ROLES, initial=Role.VIEWER.value)
class EraseForm(forms.Form):
    """A privacy erase is confirmed by typing the key: there is no undo. (No reason field: a
    reason could quote the very value being erased, and the audit row keeps no content.)"""

    confirm = forms.CharField(max_length=settings.PMEM_MAX_KEY_CHARS, strip=True,
                              error_messages={"required": "Type the key to confirm."})

    def __init__(self, *args: Any, key: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.key = key

    def clean_confirm(self) -> str:
        typed = self.cleaned_data["confirm"]
        if typed != self.key:
            raise forms.ValidationError(f"Type the key exactly ({self.key}) to confirm.")
        return typed
