"""The reviewer's queue of open contests, resolved one or many at a time, and Undo: an
operation compensated by typed operations (restore, contest again, retract), signed by the
reviewer and audited like any other."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST
from django_htmx.http import trigger_client_event

from explorer.access import Access, namespace_access, require_reviewer
from explorer.http import actor, id_param, is_htmx, page_context, same_origin_path
from explorer.pages.cell import panel_response
from explorer.pages.outcome import undo_words
from memory.domain import InvalidOperation
from memory.selectors.frontier import QUEUE_ORDERS, contested_cells, open_contests
from memory.selectors.log import (
    changes_since,
    closed_contests,
    last_operation_id,
    operation_key,
    undo_offer,
)
from memory.selectors.undone import is_undone
from memory.services import CellNotFound, operation_apply, operation_undo

#: Open contests the queue shows at once (the count says how many more there are).
QUEUE_PAGE = 100
#: The session key of the last operation a reviewer saw in a namespace's review queue.
SEEN_KEY = "pmem-review-seen-{ns}"


@login_required
@require_POST
def undo(request: HttpRequest, ns: str, operation_id: int) -> HttpResponse:
    """Undo one operation with its compensating operations (restore, contest again, retract),
    signed by the reviewer. From the cell page (htmx) the answer is the cell panel; a plain
    post goes back to where it came from (``next``, a path of this site) or the cell page."""
    access = namespace_access(request.user, ns)
    require_reviewer(access)
    key = operation_key(namespace=access.namespace, operation_id=operation_id)
    if key is None:
        raise Http404("no such operation")
    reason = (request.POST.get("reason") or "").strip()[:2000]
    if is_undone(access.namespace, operation_id):  # a second undo could only be refused or
        return panel_response(request, access, key, status=409,  # change nothing
                              error="Undo refused: this operation was undone already; "
                                    "the log shows by whom.")
    try:
        applied = operation_undo(namespace=access.namespace, operation_id=operation_id,
                                 actor=actor(request), reason=reason)
    except InvalidOperation as exc:
        changes = changes_since(namespace=access.namespace, key=key, seen=operation_id)
        return panel_response(request, access, key, status=409,
                              error=f"Undo refused: {exc.reason}", changes=changes)
    message = undo_words(applied)
    undo_again = undo_offer(applied[-1].operation) if len(applied) == 1 else None
    target = same_origin_path(request.POST.get("next"))
    if target and not is_htmx(request):
        return redirect(target)
    return panel_response(request, access, key, message=message, undo=undo_again)


@login_required
def review(request: HttpRequest, ns: str) -> HttpResponse:
    """Open contests with their competing values inline, resolved from here one or many at a
    time, each with its own reason; and the contests later writes closed since the reviewer
    last looked (so a closed contest is not silently gone). A refused resolve keeps what was typed and says what changed."""
    access = namespace_access(request.user, ns)
    seen_key = SEEN_KEY.format(ns=access.namespace.pk)
    seen = int(request.session.get(seen_key, 0) or 0)
    live = request.method == "GET" and request.GET.get("live") == "1"
    if live:  # the page's own refresh: the closures since the page was first drawn
        seen = id_param(request.GET.get("after", "")) or 0
    results: list[dict[str, Any]] = []
    kept: dict[str, dict[str, str]] = {}
    if request.method == "POST":
        require_reviewer(access)
        results, kept = _resolve_many(request, access)
    order = request.GET.get("sort", "oldest")
    order = order if order in QUEUE_ORDERS else "oldest"
    contests = open_contests(namespace=access.namespace, limit=QUEUE_PAGE, order=order)
    total = (len(contests) if len(contests) < QUEUE_PAGE
             else contested_cells(access.namespace).count())
    closed = closed_contests(namespace=access.namespace, after=seen)
    for contest in contests:
        contest["kept"] = kept.get(contest["key"], {})
    if request.method == "GET" and not live:
        request.session[seen_key] = last_operation_id(access.namespace)
    context = {**page_context(access, "review"), "contests": contests, "closed": closed,
               "total": total, "order": order, "orders": QUEUE_ORDERS,
               "first_visit": not seen, "results": results, "seen": seen,
               "refused": [r for r in results if r.get("error")]}
    response = render(request, "explorer/review.html", context,
                      status=409 if context["refused"] and not any(
                          r.get("ok") for r in results) else 200)
    return trigger_client_event(response, "pmem-changed") if results else response


def _resolve_many(request: HttpRequest, access: Access) -> tuple[list[dict[str, Any]],
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
        problem = ("Pick the winner." if id_param(winner) is None else
                   "Say why: the reason goes in the log." if not reason else "")
        if problem:
            results.append({"key": key, "error": problem})
            kept[key] = typed
            continue
        try:
            applied = operation_apply(namespace=access.namespace, key=key, op="resolve",
                                      version_id=id_param(winner), actor=actor(request),
                                      reason=reason, explicit=True)
        except InvalidOperation as exc:
            results.append({"key": key, "error": f"Refused: {exc.reason}", "changes":
                            changes_since(namespace=access.namespace, key=key,
                                          seen=id_param(post.get(f"seen-{i}", "")))})
            kept[key] = typed
            continue
        except CellNotFound:  # erased meanwhile
            results.append({"key": key, "error": "Refused: the key is gone (erased)."})
            continue
        results.append({"key": key, "ok": True, "value": applied.cell.head.value
                        if applied.cell and applied.cell.head else None,
                        "undo": undo_offer(applied.operation)})
    return results, kept
