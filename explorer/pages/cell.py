"""The cell page at any length of history (SPEC §10) and at any past moment (SPEC §9): the head,
one page of its history and the graph's container; its live regions (the panel and its parts),
further history pages, a row's provenance and the retract form's version search are each one
bounded request of their own (the graph window and the timeline: :mod:`explorer.pages.cell_graph`).
``?as_of=`` makes every one of them read the past; the page then shows a banner and no action.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET
from django_htmx.http import trigger_client_event

from explorer.access import Access, namespace_access, require_reviewer
from explorer.http import (
    answers_refusals,
    as_of,
    as_of_param,
    int_param,
    is_htmx,
    local_as_of,
    page_context,
)
from explorer.pages.outcome import preview_text
from explorer.templatetags.explorer_tags import utc_text
from memory.domain import RESTORABLE_STATUSES, BadParameter, Status
from memory.selectors.cells import cell_head, cell_lookup
from memory.selectors.graph import WINDOW_DEFAULT
from memory.selectors.history import HISTORY_DEFAULT, history_page, version_status_at
from memory.selectors.log import last_operation_id
from memory.selectors.observations import in_flight
from memory.selectors.restores import merge_restorable, restore_notes
from memory.selectors.timeline import Steps, op_steps, resolve_jump
from memory.selectors.versions import (
    restorable_versions,
    retract_choices,
    retraction_notes,
    version_details,
    version_provenance,
)

if TYPE_CHECKING:  # the explorer reads through memory.selectors; the model is a type here
    from memory.models import Cell


#: Retracted versions read for the restore list, and distinct values it shows.
RESTORABLE_READ = 60
RESTORABLE_SHOWN = 10


def load_cell(access: Access, key: str) -> Cell:
    """The cell a key names (canonical or alias), with its head, else 404."""
    cell = cell_lookup(namespace=access.namespace, key=key)
    if cell is None:
        raise Http404("no such cell")
    return cell


# --- history ----------------------------------------------------------------------------------


def _when(moment: datetime | None) -> tuple[str, str]:
    """(ISO, display) of a time, UTC: formatted here once rather than by template filters
    (fifty rows of them were most of the page's rendering time)."""
    if moment is None:
        return "", ""
    return utc_text(moment)


def _row(entry: dict[str, Any]) -> dict[str, Any]:
    """A history entry as the table renders it: numbers and times already text."""
    vf_iso, vf_text = _when(entry["valid_from"])
    vt_iso, vt_text = _when(entry["valid_to"])
    return {**entry, "id": str(entry["version"]), "name": f"v{entry['ordinal']}",
            "support_text": "" if entry["support"] is None else str(entry["support"]),
            "vf_iso": vf_iso, "vf_text": vf_text, "vt_iso": vt_iso, "vt_text": vt_text}


def history_section(cell: Cell, *, ns: str, as_of: datetime | None = None,
                    before: str | None = None, search: str = "",
                    limit: int = HISTORY_DEFAULT) -> dict[str, Any]:
    """One page of history with its position and the pager's links (page and fragment)."""
    search = search.strip()[:200]
    try:
        page = history_page(cell, before=before, limit=limit, as_of=as_of, search=search or None)
    except BadParameter as exc:  # the page's search box is ``q``
        raise BadParameter("q" if exc.field == "search" else exc.field, exc.message) from None
    entries = [_row(e.as_dict()) for e in page.entries]
    notes = retraction_notes([e["version"] for e in entries
                              if e["status"] in RESTORABLE_STATUSES], as_of=as_of)
    # SPEC §13: when each version stops (or stopped) being current, where it has an expiry.
    details = version_details(e["version"] for e in entries)
    copies = restore_notes(cell, [e["version"] for e in entries])
    for entry in entries:
        entry["retraction"] = notes.get(entry["version"])
        entry["restore"] = copies.get(entry["version"])
        expires = details.get(entry["version"], (None, None, None))[2]
        entry["ex_iso"], entry["ex_text"] = _when(expires)
    base = {k: v for k, v in (("as_of", as_of_param(as_of) if as_of else ""), ("q", search)) if v}
    page_url = reverse("explorer:cell", args=[ns, cell.key])
    frag_url = reverse("explorer:cell_history", args=[ns, cell.key])

    def urls(name: str, extra: dict[str, str] | None) -> dict[str, str]:
        if extra is None:
            return {}
        query = urlencode({**base, **extra})
        return {f"{name}_url": f"{page_url}?{query}" if query else page_url,
                f"{name}_url_fragment": f"{frag_url}?{query}" if query else frag_url}

    first = entries[0]["ordinal"] if entries else None
    last = entries[-1]["ordinal"] if entries else None
    if not entries:
        position = "No versions." if not search else ""
    elif search:
        position = (f"{page.total:,} version{'s' if page.total != 1 else ''} whose value "
                    f"matches “{search}”" + ("" if page.total <= len(entries) else
                                            f"; showing {len(entries)} from v{first}"))
    else:
        position = (f"Versions v{first}–v{last} of {page.total:,}" if first != last
                    else f"Version v{first} of {page.total:,}")
    # Newer: the page before this one (a cursor the read gives), else the first page.
    newer = {"before": page.newer} if page.newer else ({} if before else None)
    past = {"as_of": as_of_param(as_of)} if as_of else {}
    return {
        "entries": entries, "total": page.total, "q": search, "position": position,
        # Where the list goes to follow a version chosen elsewhere (history.js): the page that
        # starts at it, ``before`` the cursor just past it.
        "follow_url": f"{frag_url}?{urlencode(past)}" if past else frag_url,
        "cursor_key": cell.pk,
        "self_url": f"{frag_url}?{urlencode({**base, **({'before': before} if before else {})})}",
        **urls("older", {"before": page.next} if page.next else None),
        **urls("newer", newer),
        **urls("newest", {} if before and page.newer else None),
    }


# --- the page ---------------------------------------------------------------------------------


def _steps(steps: Steps, ns: str, key: str) -> dict[str, str]:
    page = reverse("explorer:cell", args=[ns, key])

    def at(moment: datetime | None) -> str:
        return f"{page}?{urlencode({'as_of': as_of_param(moment)})}" if moment else ""

    return {"back": at(steps.back), "back_label": steps.back_label,
            "forward": at(steps.forward), "forward_label": steps.forward_label}


def cell_context(access: Access, cell: Cell, *, as_of: datetime | None = None,
                 before: str | None = None, search: str = "", **extra: Any) -> dict[str, Any]:
    """Everything cell.html and its partials read. While ``as_of`` is set: no actions."""
    ns = access.namespace.name
    head = cell_head(cell, as_of)
    page = reverse("explorer:cell", args=[ns, cell.key])
    context: dict[str, Any] = {
        **page_context(access, "frontier"), "can_act": access.can_act and not as_of,
        "cell": head, "as_of": as_of, "as_of_param": as_of_param(as_of) if as_of else "",
        "as_of_local": as_of.strftime("%Y-%m-%dT%H:%M:%S") if as_of else "",
        "as_of_action": page, "present_url": page, "as_of_subject": f"{cell.key}",
        "steps": _steps(op_steps(cell=cell, as_of=as_of), ns, cell.key),
        "graph_limit": WINDOW_DEFAULT,
        "history": history_section(cell, ns=ns, as_of=as_of, before=before, search=search),
        "in_flight": [] if as_of else in_flight(namespace=access.namespace),
        "op_form": extra.pop("op_form", None), "obs_form": extra.pop("obs_form", None),
        **extra,
    }
    if not as_of and access.can_act:
        heads = ([{"version": head.version, "ordinal": head.ordinal, "value": head.value,
                   "status": head.status}] if head.version else [])
        context["winners"] = heads + head.alternatives  # the choices of resolve
        context["retractable"], _more = retract_choices(cell, "")
        # What Restore can bring back: each distinct value once, never the head's own.
        context["restorable"] = merge_restorable(
            restorable_versions(cell=cell, limit=RESTORABLE_READ), head.value)[:RESTORABLE_SHOWN]
        context["seen_op"] = last_operation_id(access.namespace, cell.key)
        if head.version:  # what a reject without a value would leave: said before it is sent
            context["reject_outcome"] = preview_text(access.namespace, cell.key, "reject",
                                                     None, None)
    return context


def panel_response(request: HttpRequest, access: Access, key: str, *, status: int = 200,
                   **extra: Any) -> HttpResponse:
    """After a write: the cell panel for htmx (and a ``pmem-graph`` event so the drawing
    reloads), a redirect for a plain form post, or the whole page when there is an error.

    htmx gets 200 even for a refusal: the reason is shown in the panel it swaps in, and a
    4xx would only add a browser console error for an outcome the page handles."""
    cell = load_cell(access, key)
    context = cell_context(access, cell, **extra)
    if is_htmx(request):
        response = render(request, "explorer/partials/cell_panel.html", context)
        return trigger_client_event(response, "pmem-graph")
    if status == 200:
        return redirect("explorer:cell", ns=access.namespace.name, key=cell.key)
    return render(request, "explorer/cell.html", context, status=status)


@login_required
@require_GET
@answers_refusals
def cell(request: HttpRequest, ns: str, key: str) -> HttpResponse:
    access = namespace_access(request.user, ns)
    if request.GET.get("at"):  # the as-of field: the browser's local time, made canonical
        typed = local_as_of(request.GET["at"], request.GET.get("tz", "UTC"))
        return redirect(f"{reverse('explorer:cell', args=[ns, key])}?"
                        f"{urlencode({'as_of': as_of_param(typed)})}")
    moment = as_of(request)
    cell_row = load_cell(access, key)
    if cell_row.key != key:  # an alias: the canonical key's page is the bookmark
        return redirect(f"{reverse('explorer:cell', args=[ns, cell_row.key])}"
                        f"{'?' + request.GET.urlencode() if request.GET else ''}")
    around = int_param(request, "around")
    jump_error = ""
    if request.GET.get("jump"):
        try:
            around = resolve_jump(cell=cell_row, text=request.GET["jump"], as_of=moment)
        except BadParameter as exc:
            jump_error = exc.message
    context = cell_context(access, cell_row, as_of=moment,
                           before=request.GET.get("before") or None,
                           search=request.GET.get("q", ""))
    context.update(around=around, jump=request.GET.get("jump", ""), jump_error=jump_error)
    # A jump that names nothing of the key still shows the page, its form saying why.
    return render(request, "explorer/cell.html", context, status=400 if jump_error else 200)


@login_required
@require_GET
@answers_refusals
def cell_panel(request: HttpRequest, ns: str, key: str) -> HttpResponse:
    """One live region of the cell page: ``part`` = state | actions | restore | asof (else
    the whole panel).
    The action forms are a reviewer's: anyone else asking for them gets 403."""
    access = namespace_access(request.user, ns)
    part = request.GET.get("part", "")
    if part in ("actions", "restore"):
        require_reviewer(access)
    moment = as_of(request)
    context = cell_context(access, load_cell(access, key), as_of=moment)
    template = {"state": "explorer/partials/cell_state.html",
                "actions": "explorer/partials/cell_actions.html",
                "restore": "explorer/partials/restore_actions.html",
                "asof": "explorer/partials/as_of_controls.html"}.get(
        part, "explorer/partials/cell_panel.html")
    return render(request, template, context)


@login_required
@require_GET
@answers_refusals
def cell_history(request: HttpRequest, ns: str, key: str) -> HttpResponse:
    """One page of the history (``before``: the cursor; ``q``: value search), as the cell
    page's fragment for htmx, else the whole page at that page of history."""
    access = namespace_access(request.user, ns)
    moment = as_of(request)
    cell_row = load_cell(access, key)
    if not is_htmx(request):
        query = request.GET.urlencode()
        return redirect(f"{reverse('explorer:cell', args=[ns, cell_row.key])}"
                        f"{'?' + query if query else ''}")
    context = {"ns": access.namespace, "cell": cell_row, "as_of": moment,
               "as_of_param": as_of_param(moment) if moment else "",
               "history": history_section(cell_row, ns=ns, as_of=moment,
                                          before=request.GET.get("before") or None,
                                          search=request.GET.get("q", ""))}
    return render(request, "explorer/partials/cell_history.html", context)


@login_required
@require_GET
@answers_refusals
def cell_version(request: HttpRequest, ns: str, key: str, version_id: int) -> HttpResponse:
    """Why one version exists: the expansion of its history row."""
    access = namespace_access(request.user, ns)
    moment = as_of(request)
    cell_row = load_cell(access, key)
    provenance = version_provenance(
        cell=cell_row, version_id=version_id, as_of=moment,
        status_at=version_status_at(version_id, moment) if moment else None)
    if provenance is None:
        raise Http404("no such version of this key")
    return render(request, "explorer/partials/version_provenance.html", {
        "ns": access.namespace, "v": provenance.version, "operations": provenance.operations,
        "more_operations": provenance.more_operations, "supporters": provenance.supporters,
        "cell_key": cell_row.key, "as_of": moment,
        "can_retract": access.can_act and moment is None
        and provenance.version["status"] != Status.REVOKED})


@login_required
@require_GET
def cell_version_choices(request: HttpRequest, ns: str, key: str) -> HttpResponse:
    """The retract form's choices: versions found by value, ``v12`` or ``id 345``."""
    access = namespace_access(request.user, ns)
    require_reviewer(access)
    cell_row = load_cell(access, key)
    search = request.GET.get("vq", "")[:200]
    choices, more = retract_choices(cell_row, search)
    return render(request, "explorer/partials/version_choices.html", {
        "choices": choices, "choices_more": more, "vq": search,
        "cell": {"version": cell_row.head_id}})
