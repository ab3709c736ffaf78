"""What a reviewer does to a cell from its page: one typed operation (answered with the cell's
panel) and the privacy erase (SPEC §6) with its confirmation page. Reviewers only; every write
goes through :mod:`memory.services`, exactly as the API's do."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from explorer.access import namespace_access, require_reviewer
from explorer.forms import FORM_OPS, EraseForm, OperationForm
from explorer.http import actor, page_context
from explorer.pages.cell import load_cell, panel_response
from memory.domain import CellStatus, InvalidOperation
from memory.selectors.cells import cell_head
from memory.selectors.log import changes_since, undo_offer
from memory.services import CellNotFound, cell_erase, erase_preview, operation_apply
from memory.tasks import enqueue_erase_followup

OP_LABELS = dict(FORM_OPS)


def _outcome(value: str | None, status: str, op: str) -> str:
    label = OP_LABELS.get(op, op)
    if value is None:
        return f"{label}: done. The cell is now empty."
    flag = " (contested)" if status == CellStatus.CONTESTED else ""
    return f"{label}: done. Current value: {value}{flag}."


@login_required
@require_POST
def cell_operate(request: HttpRequest, ns: str, key: str) -> HttpResponse:
    """Apply one typed operation a reviewer asked for. An operation that is invalid in the
    cell's state is refused with its reason (409), exactly as the API refuses it."""
    access = namespace_access(request.user, ns)
    require_reviewer(access)
    form = OperationForm(request.POST)
    if not form.is_valid():
        return panel_response(request, access, key, status=422, op_form=form,
                              error="Check the form: " + "; ".join(
                                  str(e) for errs in form.errors.values() for e in errs))
    data = form.cleaned_data
    try:
        applied = operation_apply(namespace=access.namespace, key=key, op=data["op"],
                                  actor=actor(request), value=data["value"] or None,
                                  version_id=data["version"], reason=data["reason"],
                                  explicit=True)
    except InvalidOperation as exc:
        # Keep what was typed (op_form), show the current choices (the panel is re-read),
        # and say what changed since the page was drawn: the refusal is most often a
        # reviewer acting on a page another person's action made stale.
        seen = request.POST.get("seen", "")[:19]
        changes = changes_since(namespace=access.namespace, key=load_cell(access, key).key,
                                seen=int(seen) if seen.isascii() and seen.isdigit() else None)
        return panel_response(request, access, key, status=409, op_form=form,
                              error=f"Refused: {exc.reason}", changes=changes)
    except CellNotFound:
        raise Http404("no such cell") from None
    head = cell_head(load_cell(access, key))
    return panel_response(request, access, key,
                          message=_outcome(head.value, head.status, data["op"]),
                          undo=undo_offer(applied.operation))


@login_required
def cell_erase_page(request: HttpRequest, ns: str, key: str) -> HttpResponse:
    """Privacy erase (SPEC §6), reviewers only. GET: what would go, what would be redacted and
    where else the values appear (with links), and a form that asks for the key to be typed.
    POST: erase, then what was redacted and the mentions that remain."""
    access = namespace_access(request.user, ns)
    require_reviewer(access)
    try:
        preview = erase_preview(namespace=access.namespace, key=key)
    except CellNotFound:
        raise Http404("no such cell") from None
    if preview.key != key:  # an alias: confirm on the canonical key's page
        return redirect("explorer:cell_erase", ns=ns, key=preview.key)
    context = {**page_context(access, "frontier"), "preview": preview, "key": key}
    if request.method != "POST":
        return render(request, "explorer/erase.html", {**context, "form": EraseForm(key=key)})
    form = EraseForm(request.POST, key=key)
    if not form.is_valid():
        return render(request, "explorer/erase.html", {**context, "form": form}, status=422)
    erased = cell_erase(namespace=access.namespace, key=key, actor=actor(request), report=True)
    enqueue_erase_followup()
    return render(request, "explorer/erase.html", {**context, "erased": erased})
