"""What an action will do, said before the reviewer confirms it: the cell page's confirmation
asks the server, which decides the operation with the code that applies it and writes nothing
(:func:`memory.services.preview.operation_preview`). A reject that would empty the key says so."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from explorer.access import namespace_access, require_reviewer
from explorer.forms import FORM_OPS
from memory.domain import OpType
from memory.services import Applied
from memory.services.preview import Outcome, operation_preview

PREVIEWED = {op for op, _label in FORM_OPS}


def _short(value: str | None, limit: int = 80) -> str:
    text = " ".join((value or "").split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def outcome_words(outcome: Outcome, key: str) -> str:
    """The outcome in one or two plain sentences."""
    if outcome.refused:
        reason = outcome.refused.removeprefix("invalid: ")
        return f"This will be refused: {reason}. Nothing will change."
    if outcome.empty:
        return (f"After this, {key} will be EMPTY: no earlier value holds, so nothing is "
                "reinstated. Restore brings a value back later.")
    name = "a new version" if outcome.new else f"v{outcome.head_ordinal}"
    value = f"“{_short(outcome.head_value)}”"
    if not outcome.changed:
        text = f"The current value stays {value} ({name})"
    else:
        text = f"After this, the current value will be {value} ({name})"
    if outcome.alternatives:
        others = ", ".join(f"“{_short(a, 40)}”" for a in outcome.alternatives[:5])
        text += f", contested by {others}"
    return text + "."


def preview_text(namespace: object, key: str, op: str, value: str | None,
                 version: int | None) -> str:
    outcome = operation_preview(namespace=namespace,  # type: ignore[arg-type]
                                key=key, op=op, value=value or None, version_id=version)
    return outcome_words(outcome, key)


@login_required
@require_GET
def cell_preview(request: HttpRequest, ns: str, key: str) -> HttpResponse:
    """``?op=&value=&version=``: the outcome sentence, as plain text (the confirmation's last
    line). An unknown op or a version that is not a number is a 400 naming the field."""
    access = namespace_access(request.user, ns)
    require_reviewer(access)
    op = request.GET.get("op", "")
    if op not in PREVIEWED or op == "observe":
        return HttpResponse("op: not an operation of this page", status=400,
                            content_type="text/plain; charset=utf-8")
    raw = request.GET.get("version", "").strip()
    if raw and not (raw.isascii() and raw.isdigit() and len(raw) < 19):
        return HttpResponse("version: not a version id", status=400,
                            content_type="text/plain; charset=utf-8")
    value = request.GET.get("value", "")[:10000].strip()
    text = preview_text(access.namespace, key, OpType(op), value, int(raw) if raw else None)
    return HttpResponse(text, content_type="text/plain; charset=utf-8")


def _original(version: Any) -> Any:
    """The first version of a chain of restores (a value retracted and restored again)."""
    for _hop in range(50):
        if version.restores_id is None:
            break
        version = version.restores
    return version


def undo_words(applied: list[Applied]) -> str:
    """What an undo did, in a reviewer's words ("Undone: “Atlantis” is the current value
    again (v8, restore of v4)."), naming versions by their place in the key."""
    parts = []
    for one in applied:
        operation = one.operation
        version = operation.version
        name = f"v{version.ordinal}" if version is not None else ""
        value = f"“{_short(version.value if version is not None else operation.value)}”"
        origin = (operation.payload or {}).get("reopens")
        if operation.type == OpType.RESTORE and version is not None and version.restores_id:
            parts.append(f"{value} is the current value again ({name}, restore of "
                         f"v{_original(version).ordinal}, with its evidence)")
        elif operation.type == OpType.RESTORE:
            parts.append(f"{value} is the current value again ({name})")
        elif operation.type == OpType.CONTEST and origin:
            parts.append(f"{value} is back in the contest ({name}, with its own evidence)")
        elif operation.type == OpType.CONTEST:
            parts.append(f"{value} competes with the current value again ({name})")
        elif operation.type == OpType.REVOKE:
            parts.append(f"{value} is retracted ({name})")
        else:
            parts.append(f"{operation.type} {value}")
    return "Undone: " + "; ".join(parts) + "."
