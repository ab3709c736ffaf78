"""The cell page at any length of history (SPEC §10) and at any past moment (SPEC §9).

The page carries the cell's head, one page of its history and the graph's container; the
graph window, the timeline, further history pages, a row's provenance and the retract form's
version search are each one bounded request of their own. ``?as_of=`` makes every one of them
read the past; the page then shows a banner and no action.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.serializers.json import DjangoJSONEncoder
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from explorer.access import Access, namespace_access, require_reviewer
from explorer.cell_page import (
    GRAPH_LIMIT,
    GRAPH_LIMIT_MAX,
    cell_context,
    graph_json,
    history_section,
    load_cell,
    retract_choices,
    status_at,
    timeline_json,
)
from explorer.cell_reads import (
    BadParameter,
    as_of_param,
    local_as_of,
    parse_as_of,
    resolve_jump,
    version_provenance,
)
from memory.models import Cell


def _bad(request: HttpRequest, error: BadParameter) -> HttpResponse:
    """400 naming the parameter: JSON for the page's scripts, a short page for a person."""
    if "json" in request.headers.get("Accept", "") or request.path.endswith(("/graph/", "/timeline/")):
        return JsonResponse({"error": str(error), "parameter": error.name}, status=400)
    return render(request, "explorer/bad_parameter.html", {"error": error}, status=400)


def _as_of(request: HttpRequest) -> Any:
    return parse_as_of(request.GET.get("as_of"))


def _int(request: HttpRequest, name: str, default: int | None = None, *,
         maximum: int | None = None) -> int | None:
    raw = request.GET.get(name, "")
    if raw == "":
        return default
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:
        raise BadParameter(name, "a positive whole number")
    value = int(raw)
    if maximum is not None and value > maximum:
        raise BadParameter(name, f"at most {maximum}")
    return value


def _cell(access: Access, key: str) -> Cell:
    cell = load_cell(access.namespace, key)
    if cell is None:
        raise Http404("no such cell")
    return cell


@login_required
@require_GET
def cell(request: HttpRequest, ns: str, key: str) -> HttpResponse:
    access = namespace_access(request.user, ns)
    if request.GET.get("at"):  # the as-of field: the browser's local time, made canonical
        try:
            moment = local_as_of(request.GET["at"], request.GET.get("tz", "UTC"))
        except BadParameter as exc:
            return _bad(request, exc)
        return redirect(f"{reverse('explorer:cell', args=[ns, key])}?"
                        f"{urlencode({'as_of': as_of_param(moment)})}")
    try:
        as_of = _as_of(request)
        cell_row = _cell(access, key)
        if cell_row.key != key:  # an alias: the canonical key's page is the bookmark
            return redirect(f"{reverse('explorer:cell', args=[ns, cell_row.key])}"
                            f"{'?' + request.GET.urlencode() if request.GET else ''}")
        around = _int(request, "around")
        jump_error = ""
        if request.GET.get("jump"):
            try:
                around = resolve_jump(cell=cell_row, text=request.GET["jump"], as_of=as_of)
            except BadParameter as exc:
                jump_error = exc.message
        context = cell_context(access, cell_row, as_of=as_of,
                               before=request.GET.get("before") or None,
                               search=request.GET.get("q", ""))
    except BadParameter as exc:
        return _bad(request, exc)
    context.update(around=around, jump=request.GET.get("jump", ""), jump_error=jump_error)
    # A jump that names nothing of the key still shows the page, its form saying why.
    return render(request, "explorer/cell.html", context, status=400 if jump_error else 200)


@login_required
@require_GET
def cell_panel(request: HttpRequest, ns: str, key: str) -> HttpResponse:
    """One live region of the cell page: ``part`` = state | actions (else the whole panel).
    The action forms are a reviewer's: anyone else asking for them gets 403."""
    access = namespace_access(request.user, ns)
    part = request.GET.get("part", "")
    if part in ("actions", "restore"):
        require_reviewer(access)
    try:
        as_of = _as_of(request)
        cell_row = _cell(access, key)
        context = cell_context(access, cell_row, as_of=as_of)
    except BadParameter as exc:
        return _bad(request, exc)
    template = {"state": "explorer/partials/cell_state.html",
                "actions": "explorer/partials/cell_actions.html",
                "restore": "explorer/partials/restore_actions.html"}.get(
        part, "explorer/partials/cell_panel.html")
    return render(request, template, context)


@login_required
@require_GET
def cell_graph_json(request: HttpRequest, ns: str, key: str) -> HttpResponse:
    """A window of the graph: ``around`` (a version id; default the head), ``limit``
    versions (default 40, at most 500), ``side`` (older / newer: the versions beyond
    ``around`` on that side only), ``jump`` (v12, id 345 or a date), ``as_of``."""
    access = namespace_access(request.user, ns)
    try:
        as_of = _as_of(request)
        cell_row = _cell(access, key)
        limit = _int(request, "limit", GRAPH_LIMIT, maximum=GRAPH_LIMIT_MAX) or GRAPH_LIMIT
        around = _int(request, "around")
        side = request.GET.get("side", "")
        if side not in ("", "older", "newer"):
            raise BadParameter("side", "older or newer")
        focus = None
        if request.GET.get("jump"):
            around = resolve_jump(cell=cell_row, text=request.GET["jump"], as_of=as_of)
            focus = f"v{around}"
        graph = graph_json(cell_row, ns=ns, around=around, limit=limit, side=side or None,
                           as_of=as_of)
    except BadParameter as exc:
        return _bad(request, exc)
    if focus:
        graph["focus"] = focus
    return JsonResponse(graph, encoder=DjangoJSONEncoder)


@login_required
@require_GET
def cell_timeline(request: HttpRequest, ns: str, key: str) -> HttpResponse:
    """The compact timeline of the whole chain: counts by time bucket and status."""
    access = namespace_access(request.user, ns)
    try:
        as_of = _as_of(request)
        cell_row = _cell(access, key)
        data = timeline_json(cell_row, as_of=as_of)
    except BadParameter as exc:
        return _bad(request, exc)
    return JsonResponse(data, encoder=DjangoJSONEncoder)


@login_required
@require_GET
def cell_history(request: HttpRequest, ns: str, key: str) -> HttpResponse:
    """One page of the history (``before``: the cursor; ``q``: value search), as the cell
    page's fragment for htmx, else the whole page at that page of history."""
    access = namespace_access(request.user, ns)
    try:
        as_of = _as_of(request)
        cell_row = _cell(access, key)
        if not getattr(request, "htmx", False):
            query = request.GET.urlencode()
            return redirect(f"{reverse('explorer:cell', args=[ns, cell_row.key])}"
                            f"{'?' + query if query else ''}")
        context = {"ns": access.namespace, "cell": cell_row, "as_of": as_of,
                   "as_of_param": as_of_param(as_of) if as_of else "",
                   "history": history_section(cell_row, ns=ns, as_of=as_of,
                                              before=request.GET.get("before") or None,
                                              search=request.GET.get("q", ""))}
    except BadParameter as exc:
        return _bad(request, exc)
    return render(request, "explorer/partials/cell_history.html", context)


@login_required
@require_GET
def cell_version(request: HttpRequest, ns: str, key: str, version_id: int) -> HttpResponse:
    """Why one version exists: the expansion of its history row."""
    access = namespace_access(request.user, ns)
    try:
        as_of = _as_of(request)
        cell_row = _cell(access, key)
    except BadParameter as exc:
        return _bad(request, exc)
    provenance = version_provenance(
        cell=cell_row, version_id=version_id, as_of=as_of,
        status_at=status_at(version_id, as_of) if as_of else None)
    if provenance is None:
        raise Http404("no such version of this key")
    return render(request, "explorer/partials/version_provenance.html", {
        "ns": access.namespace, "v": provenance.version, "operations": provenance.operations,
        "more_operations": provenance.more_operations, "supporters": provenance.supporters,
        "cell_key": cell_row.key, "as_of": as_of,
        "can_retract": access.can_act and as_of is None
        and provenance.version["status"] != "revoked"})


@login_required
@require_GET
def cell_version_choices(request: HttpRequest, ns: str, key: str) -> HttpResponse:
    """The retract form's choices: versions found by value, ``v12`` or ``id 345``."""
    access = namespace_access(request.user, ns)
    require_reviewer(access)
    cell_row = _cell(access, key)
    search = request.GET.get("vq", "")[:200]
    choices, more = retract_choices(cell_row, search)
    head = cell_row.head_id
    return render(request, "explorer/partials/version_choices.html", {
        "choices": choices, "choices_more": more, "vq": search,
        "cell": {"version": head}})
