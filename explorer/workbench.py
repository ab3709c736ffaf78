"""The reviewer's workbench (issue 17): undo, the review queue of open contests, two versions
side by side, and streamed exports. Typed function views like :mod:`explorer.views`; reads
come from :mod:`explorer.workbench_selectors`, writes from :mod:`memory.services`."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.serializers.json import DjangoJSONEncoder
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import trigger_client_event

from explorer import workbench_selectors as wb
from explorer.access import namespace_access, require_reviewer
from explorer.forms import LogFilter
from explorer.views import _ns_context, _panel_response, _same_origin_path
from memory.domain import InvalidOperation
from memory.domain.spreadsheet import inert_cell
from memory.domain.textdiff import word_diff
from memory.models import Operation
from memory.selectors import cell_lookup
from memory.services import CellNotFound, operation_apply, operation_undo

BIGINT_LIMIT = 2**63
#: Open contests the queue shows at once (the count says how many more there are).
QUEUE_PAGE = 100
#: The session key of the last operation a reviewer saw in a namespace's review queue.
SEEN_KEY = "pmem-review-seen-{ns}"


def _actor(request: HttpRequest) -> str:
    return f"user:{request.user.get_username()}"


def _ns(access: Any, section: str) -> dict[str, Any]:
    return _ns_context(access, section)


# --- undo --------------------------------------------------------------------------------------


@login_required
@require_POST
def undo(request: HttpRequest, ns: str, operation_id: int) -> HttpResponse:
    """Undo one operation with its compensating operations (restore, contest again, retract),
    signed by the reviewer. From the cell page (htmx) the answer is the cell panel; a plain
    post goes back to where it came from (``next``, a path of this site) or the cell page."""
    access = namespace_access(request.user, ns)
    require_reviewer(access)
    operation = (Operation.objects.filter(namespace=access.namespace, pk=operation_id)
                 .only("id", "key").first() if operation_id < BIGINT_LIMIT else None)
    if operation is None:
        raise Http404("no such operation")
    reason = (request.POST.get("reason") or "").strip()[:2000]
    try:
        applied = operation_undo(namespace=access.namespace, operation_id=operation_id,
                                 actor=_actor(request), reason=reason)
    except InvalidOperation as exc:
        changes = wb.changes_since(namespace=access.namespace, key=operation.key,
                                   seen=operation_id)
        return _panel_response(request, access, operation.key, status=409,
                               error=f"Undo refused: {exc.reason}", changes=changes)
    done = ", ".join(f"{a.operation.type} (operation {a.operation.pk})" for a in applied)
    message = f"Undone: operation {operation_id} was compensated by {done}."
    undo_again = wb.undo_offer(applied[-1].operation) if len(applied) == 1 else None
    target = _same_origin_path(request.POST.get("next"))
    if target and not getattr(request, "htmx", False):
        return redirect(target)
    return _panel_response(request, access, operation.key, message=message, undo=undo_again)


# --- the review queue --------------------------------------------------------------------------


@login_required
def review(request: HttpRequest, ns: str) -> HttpResponse:
    """Open contests with their competing values inline, resolved from here one or many at a
    time, each with its own reason; and the contests later writes closed since the reviewer
    last looked (decision 63). A refused resolve keeps what was typed and says what changed."""
    access = namespace_access(request.user, ns)
    seen_key = SEEN_KEY.format(ns=access.namespace.pk)
    seen = int(request.session.get(seen_key, 0) or 0)
    results: list[dict[str, Any]] = []
    kept: dict[str, dict[str, str]] = {}
    if request.method == "POST":
        require_reviewer(access)
        results, kept = _resolve_many(request, access)
    order = request.GET.get("sort", "oldest")
    order = order if order in wb.QUEUE_ORDERS else "oldest"
    contests = wb.open_contests(namespace=access.namespace, limit=QUEUE_PAGE, order=order)
    total = (len(contests) if len(contests) < QUEUE_PAGE
             else wb.contested_cells(access.namespace).count())
    closed = wb.closed_contests(namespace=access.namespace, after=seen)
    for contest in contests:
        contest["kept"] = kept.get(contest["key"], {})
    if request.method == "GET":
        request.session[seen_key] = wb.last_operation_id(access.namespace)
    context = {**_ns(access, "review"), "contests": contests, "closed": closed,
               "total": total, "order": order, "orders": wb.QUEUE_ORDERS,
               "first_visit": not seen, "results": results,
               "refused": [r for r in results if r.get("error")]}
    response = render(request, "explorer/review.html", context,
                      status=409 if context["refused"] and not any(
                          r.get("ok") for r in results) else 200)
    return trigger_client_event(response, "pmem-changed") if results else response


def _resolve_many(request: HttpRequest, access: Any) -> tuple[list[dict[str, Any]],
                                                              dict[str, dict[str, str]]]:
    """Each selected contest is resolved in its own transaction: one refusal (the contest
    was closed meanwhile) does not undo the others."""
    post = request.POST
    only = post.get("only")
    indexes = [only] if only else post.getlist("pick")
    results: list[dict[str, Any]] = []
    kept: dict[str, dict[str, str]] = {}
    for i in indexes:
        key, winner = post.get(f"key-{i}", "")[:300], post.get(f"winner-{i}", "")[:20]
        reason = (post.get(f"reason-{i}") or "").strip()[:2000]
        typed = {"winner": winner, "reason": reason}
        problem = ("Pick the winner." if _version_id(winner) is None else
                   "Say why: the reason goes in the log." if not reason else "")
        if problem:
            results.append({"key": key, "error": problem})
            kept[key] = typed
            continue
        try:
            applied = operation_apply(namespace=access.namespace, key=key, op="resolve",
                                      version_id=_version_id(winner), actor=_actor(request),
                                      reason=reason, explicit=True)
        except InvalidOperation as exc:
            results.append({"key": key, "error": f"Refused: {exc.reason}", "changes":
                            wb.changes_since(namespace=access.namespace, key=key,
                                             seen=_version_id(post.get(f"seen-{i}", "")))})
            kept[key] = typed
            continue
        except CellNotFound:  # erased meanwhile
            results.append({"key": key, "error": "Refused: the key is gone (erased)."})
            continue
        results.append({"key": key, "ok": True, "value": applied.cell.head.value
                        if applied.cell and applied.cell.head else None,
                        "undo": wb.undo_offer(applied.operation)})
    return results, kept


# --- two versions side by side -----------------------------------------------------------------


@login_required
@require_GET
def diff(request: HttpRequest, ns: str, key: str) -> HttpResponse:
    """Any two versions of ``key`` side by side (``?a=&b=``, version ids; default: the head
    and the version before it)."""
    access = namespace_access(request.user, ns)
    cell = cell_lookup(namespace=access.namespace, key=key)
    if cell is None:
        raise Http404("no such cell")
    choices = wb.version_choices(namespace=access.namespace, key=cell.key)
    a, b = _version_param(request, "a"), _version_param(request, "b")
    if a is None and b is None and len(choices) >= 2:
        b, a = choices[0]["id"], choices[1]["id"]
    left = wb.version_side(namespace=access.namespace, key=cell.key, version_id=a) if a else None
    right = wb.version_side(namespace=access.namespace, key=cell.key, version_id=b) if b else None
    missing = [name for name, want, got in (("a", a, left), ("b", b, right)) if want and not got]
    if left and right:
        left["segments"], right["segments"] = word_diff(left["version"].value,
                                                        right["version"].value)
    context = {**_ns(access, "frontier"), "key": cell.key, "choices": choices, "a": a, "b": b,
               "left": left, "right": right, "missing": missing,
               "same": bool(left and right and left["version"].value == right["version"].value)}
    return render(request, "explorer/diff.html", context, status=404 if missing else 200)


def _version_param(request: HttpRequest, name: str) -> int | None:
    return _version_id(request.GET.get(name, ""))


def _version_id(raw: str) -> int | None:
    """An id written in ASCII digits that PostgreSQL's bigint holds, else None."""
    raw = raw[:20]
    return int(raw) if raw.isascii() and raw.isdigit() and 0 < int(raw) < BIGINT_LIMIT else None


# --- exports -----------------------------------------------------------------------------------


class _Echo:
    """A file-like object whose write returns the line: csv.writer then yields strings."""

    def write(self, value: str) -> str:
        return value


def _stream(rows: Iterable[tuple[Any, ...]], fields: tuple[str, ...], fmt: str,
            filename: str) -> StreamingHttpResponse:
    """CSV or JSON (an array of objects), produced row by row as the cursor delivers them."""
    if fmt == "csv":
        writer = csv.writer(_Echo())
        body: Iterator[str] = (writer.writerow(r) for r in _with_header(fields, rows))
        content_type = "text/csv; charset=utf-8"
    else:
        body = _json_array(fields, rows)
        content_type = "application/json"
    response = StreamingHttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}.{fmt}"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


def _with_header(fields: tuple[str, ...], rows: Iterable[tuple[Any, ...]]
                 ) -> Iterator[tuple[Any, ...]]:
    """The header, then each row as CSV cells: times in ISO 8601, and no cell a spreadsheet
    would run as a formula (memory.domain.spreadsheet)."""
    yield fields
    for row in rows:
        yield tuple(inert_cell("" if v is None else v.isoformat() if hasattr(v, "isoformat")
                               else v) for v in row)


def _json_array(fields: tuple[str, ...], rows: Iterable[tuple[Any, ...]]) -> Iterator[str]:
    yield "["
    sep = ""
    for row in rows:
        yield sep + json.dumps(dict(zip(fields, row, strict=True)), cls=DjangoJSONEncoder,
                               ensure_ascii=False)
        sep = ",\n"
    yield "]\n"


def _fmt(fmt: str) -> str:
    if fmt not in ("csv", "json"):
        raise Http404("csv or json")
    return fmt


@login_required
@require_GET
def export_history(request: HttpRequest, ns: str, key: str, fmt: str) -> StreamingHttpResponse:
    access = namespace_access(request.user, ns)
    cell = cell_lookup(namespace=access.namespace, key=key)
    if cell is None:
        raise Http404("no such cell")
    return _stream(wb.history_rows(cell=cell), wb.HISTORY_FIELDS, _fmt(fmt),
                   f"{access.namespace.name}-{cell.key}-history")


@login_required
@require_GET
def export_frontier(request: HttpRequest, ns: str, fmt: str) -> StreamingHttpResponse:
    access = namespace_access(request.user, ns)
    return _stream(wb.frontier_rows(namespace=access.namespace), wb.FRONTIER_FIELDS, _fmt(fmt),
                   f"{access.namespace.name}-frontier")


@login_required
@require_GET
def export_log(request: HttpRequest, ns: str, fmt: str) -> StreamingHttpResponse:
    access = namespace_access(request.user, ns)
    rows = (r[:6] + (r[6] if r[6] is not None else r[12],) + r[7:12]
            for r in wb.log_rows(namespace=access.namespace, filters=log_filters(request)))
    return _stream(rows, wb.LOG_FIELDS, _fmt(fmt), f"{access.namespace.name}-operations")


def log_filters(request: HttpRequest) -> wb.LogFilters:
    form = LogFilter(request.GET)
    form.is_valid()  # a field in error is left out; the others still filter
    data = form.cleaned_data
    return wb.LogFilters(**{name: data.get(name) or "" for name in
                            ("key", "key_contains", "op", "actor", "source")})

