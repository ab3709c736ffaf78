"""The provenance explorer: typed function views over ``memory.selectors`` (reads) and
``memory.services`` (writes). Every page checks namespace membership through
:mod:`explorer.access`; every write also requires the reviewer role.

htmx requests get fragments (the cell panel, the frontier table, the observation list);
the same URLs answer plain browser requests with whole pages, so nothing needs JavaScript
except the graph drawing.
"""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import trigger_client_event

from explorer.access import Access, namespace_access, require_reviewer, visible_namespaces
from explorer.asof_views import frontier_past
from explorer.cell_page import cell_context, cell_head, load_cell
from explorer.forms import (
    FORM_OPS,
    FRONTIER_FILTERS,
    EraseForm,
    FrontierFilter,
    LogFilter,
    ObservationForm,
    OperationForm,
    ReadForm,
)
from explorer.reading import AGENT_MODE, MODE_HELP, frontier_columns, read_all
from explorer.selectors import (
    frontier_page,
    live_fingerprint,
    namespace_overview,
    observation_page,
    observations_unsettled,
    observations_with_drops,
)
from explorer.workbench_selectors import (
    LogFilters,
    changes_since,
    log_page,
    observation_yield,
    observations_without_facts,
    undo_offer,
)
from memory.domain import LOG_TYPES, CellStatus, InvalidOperation
from memory.models import Cell, Evidence, Membership
from memory.reads import READ_MODES
from memory.services import (
    CellNotFound,
    cell_erase,
    erase_preview,
    observation_record,
    observation_retry,
    operation_apply,
)
from memory.tasks import enqueue_erase_followup, enqueue_observation

log = logging.getLogger("pmem.explorer")
OP_LABELS = dict(FORM_OPS)
LOG_PAGE = 50


def _is_htmx(request: HttpRequest) -> bool:
    return bool(getattr(request, "htmx", False))


def _htmx_target(request: HttpRequest) -> str | None:
    """The element an htmx request swaps (django-htmx's ``request.htmx``, set by its
    middleware), None for a plain request."""
    htmx = getattr(request, "htmx", None)
    return htmx.target if htmx else None


def _actor(request: HttpRequest) -> str:
    return f"user:{request.user.get_username()}"


def _same_origin_path(target: str | None) -> str | None:
    """``target`` when it is a path on this site ('/ns/...'), else None: a ``next`` from a
    form must not send anyone to another site (an open redirect) or to a ``javascript:``
    URL. Django's check refuses a scheme, a host, '//' and '\\' tricks; a path must also
    start with one '/' and hold no control character."""
    if not target or not target.startswith("/") or not target.isprintable():
        return None
    return target if url_has_allowed_host_and_scheme(target, allowed_hosts=None) else None


def _ns_context(access: Access, section: str) -> dict[str, Any]:
    return {"ns": access.namespace, "role": access.role, "can_act": access.can_act,
            "can_manage": access.can_manage, "section": section,
            "fingerprint": live_fingerprint(access.namespace)}


# --- namespaces ------------------------------------------------------------------------------


@login_required
@require_GET
def index(request: HttpRequest) -> HttpResponse:
    namespaces = list(visible_namespaces(request.user).order_by("name"))
    roles = dict(Membership.objects.filter(user_id=request.user.pk or 0)
                 .values_list("namespace_id", "role"))
    rows = namespace_overview(namespaces, roles)
    return render(request, "explorer/index.html", {"rows": rows, "model": _model_status()})


@require_GET
def glossary(request: HttpRequest) -> HttpResponse:
    """The words the explorer uses, a sentence each; open to anyone (it tells nothing about any
    namespace), so the login page can link to it too."""
    return render(request, "explorer/glossary.html", {"section": "glossary"})


def _model_status() -> dict[str, Any] | None:
    """The chat model and its structured-output form, as /healthz shows them (one short
    probe when this process has not talked to the model yet)."""
    from memory.llm.check import model_status
    from memory.llm.client import client_from_settings

    return model_status(client_from_settings(timeout=3.0, max_retries=0))


@login_required
@require_GET
def live(request: HttpRequest, ns: str) -> HttpResponse:
    """The polling fragment: 204 while nothing changed, else a fresh poller and a
    ``pmem-changed`` event that tells the page's live regions to re-render themselves."""
    access = namespace_access(request.user, ns)
    fingerprint = live_fingerprint(access.namespace)
    if request.GET.get("fp") == fingerprint:
        return HttpResponse(status=204)
    response = render(request, "explorer/partials/live.html",
                      {"ns": access.namespace, "fingerprint": fingerprint, "changed": True})
    return trigger_client_event(response, "pmem-changed")


# --- frontier --------------------------------------------------------------------------------


@login_required
@require_GET
def frontier(request: HttpRequest, ns: str) -> HttpResponse:
    access = namespace_access(request.user, ns)
    if request.GET.get("as_of") or request.GET.get("at"):  # SPEC §9: the frontier then
        return frontier_past(request, access)
    form = FrontierFilter(request.GET)
    data = form.cleaned_data if form.is_valid() else {}
    show = data.get("show") or "all"
    search = data.get("q") or ""
    context = {**_ns_context(access, "frontier"), "show": show, "q": search,
               "filters": FRONTIER_FILTERS}
    if show == "failed":
        context["failed"] = observations_unsettled(namespace=access.namespace, failed_only=True)
    else:
        context["page"] = frontier_page(namespace=access.namespace, show=show, search=search,
                                        sort=data.get("sort") or "", page=data.get("page") or 1)
        context["columns"] = frontier_columns(context["page"].sort)
    if _htmx_target(request) == "frontier-results":
        return render(request, "explorer/partials/frontier_results.html", context)
    return render(request, "explorer/frontier.html", context)


# --- cell page (explorer.cell_views; the actions below answer with its panel) ---------------


def _cell_or_404(access: Access, key: str) -> Cell:
    cell = load_cell(access.namespace, key)
    if cell is None:
        raise Http404("no such cell")
    return cell


def _cell_context(access: Access, cell: Cell, **extra: Any) -> dict[str, Any]:
    return cell_context(access, cell, **extra)


def _panel_response(request: HttpRequest, access: Access, key: str, *, status: int = 200,
                    **extra: Any) -> HttpResponse:
    """After a write: the cell panel for htmx (and a ``pmem-graph`` event so the drawing
    reloads), a redirect for a plain form post, or the whole page when there is an error.

    htmx gets 200 even for a refusal: the reason is shown in the panel it swaps in, and a
    4xx would only add a browser console error for an outcome the page handles."""
    cell = _cell_or_404(access, key)
    context = _cell_context(access, cell, **extra)
    if _is_htmx(request):
        response = render(request, "explorer/partials/cell_panel.html", context)
        return trigger_client_event(response, "pmem-graph")
    if status == 200:
        return redirect("explorer:cell", ns=access.namespace.name, key=cell.key)
    return render(request, "explorer/cell.html", context, status=status)


def _outcome(cell: Cell, op: str) -> str:
    detail = cell_head(cell)
    label = OP_LABELS.get(op, op)
    if detail.value is None:
        return f"{label}: done. The cell is now empty."
    flag = " (contested)" if detail.status == CellStatus.CONTESTED else ""
    return f"{label}: done. Current value: {detail.value}{flag}."


@login_required
@require_POST
def cell_operate(request: HttpRequest, ns: str, key: str) -> HttpResponse:
    """Apply one typed operation a reviewer asked for. An operation that is invalid in the
    cell's state is refused with its reason (409), exactly as the API refuses it."""
    access = namespace_access(request.user, ns)
    require_reviewer(access)
    form = OperationForm(request.POST)
    if not form.is_valid():
        return _panel_response(request, access, key, status=422, op_form=form,
                               error="Check the form: " + "; ".join(
                                   str(e) for errs in form.errors.values() for e in errs))
    data = form.cleaned_data
    try:
        applied = operation_apply(namespace=access.namespace, key=key, op=data["op"],
                                  actor=_actor(request), value=data["value"] or None,
                                  version_id=data["version"], reason=data["reason"],
                                  explicit=True)
    except InvalidOperation as exc:
        # Keep what was typed (op_form), show the current choices (the panel is re-read),
        # and say what changed since the page was drawn (issue 17, item 4).
        seen = request.POST.get("seen", "")[:19]
        changes = changes_since(namespace=access.namespace, key=_cell_or_404(access, key).key,
                                seen=int(seen) if seen.isascii() and seen.isdigit() else None)
        return _panel_response(request, access, key, status=409, op_form=form,
                               error=f"Refused: {exc.reason}", changes=changes)
    except CellNotFound:
        raise Http404("no such cell") from None
    return _panel_response(request, access, key,
                           message=_outcome(_cell_or_404(access, key), data["op"]),
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
    context = {**_ns_context(access, "frontier"), "preview": preview, "key": key}
    if request.method != "POST":
        return render(request, "explorer/erase.html", {**context, "form": EraseForm(key=key)})
    form = EraseForm(request.POST, key=key)
    if not form.is_valid():
        return render(request, "explorer/erase.html", {**context, "form": form}, status=422)
    erased = cell_erase(namespace=access.namespace, key=key, actor=_actor(request), report=True)
    enqueue_erase_followup()
    return render(request, "explorer/erase.html", {**context, "erased": erased})


# --- observations ----------------------------------------------------------------------------


@login_required
@require_POST
def observation_add(request: HttpRequest, ns: str) -> HttpResponse:
    """Record an observation (evidence with its seq) and queue its processing after commit.
    From a cell page (``key`` given) the answer is that cell's panel."""
    access = namespace_access(request.user, ns)
    require_reviewer(access)
    key = request.POST.get("key", "")
    form = ObservationForm(request.POST)
    if not form.is_valid():
        if key:
            return _panel_response(request, access, key, status=422, obs_form=form,
                                   error="The observation needs text.")
        return redirect("explorer:operations", ns=ns)
    recorded = observation_record(namespace=access.namespace, text=form.cleaned_data["text"],
                                  source=form.cleaned_data["source"] or "explorer",
                                  actor=_actor(request))
    enqueue_observation(recorded.evidence.pk)
    if key:
        return _panel_response(request, access, key, message=(
            f"Observation #{recorded.evidence.seq} recorded; it shows here once a worker "
            "commits it."))
    return redirect("explorer:operations", ns=ns)


@login_required
@require_POST
def observation_retry_view(request: HttpRequest, ns: str, evidence_id: int) -> HttpResponse:
    access = namespace_access(request.user, ns)
    require_reviewer(access)
    evidence = get_object_or_404(Evidence.objects.only("id", "namespace_id", "state"),
                                 pk=evidence_id, namespace=access.namespace)
    if observation_retry(evidence=evidence):
        enqueue_observation(evidence.pk)
    if _is_htmx(request):
        context = {**_ns_context(access, "operations"),
                   "unsettled": observations_unsettled(namespace=access.namespace)}
        response = render(request, "explorer/partials/observations.html", context)
        return trigger_client_event(response, "pmem-changed")
    return redirect(_same_origin_path(request.POST.get("next"))
                    or reverse("explorer:operations", args=[ns]))


@login_required
@require_GET
def observation(request: HttpRequest, ns: str, evidence_id: int) -> HttpResponse:
    """One observation whole (text, facts, what it did): where the graph and the lists, which
    show only the head of a text, link to."""
    access = namespace_access(request.user, ns)
    page = observation_page(namespace=access.namespace, evidence_id=evidence_id)
    if page is None:
        raise Http404("no such observation")
    return render(request, "explorer/observation.html", {
        **_ns_context(access, "operations"), "page": page, "e": page.evidence,
        "no_fact": observation_yield(page.evidence),
        "api_url": reverse("api-observation", args=[ns, evidence_id])})


@login_required
@require_GET
def observations_fragment(request: HttpRequest, ns: str) -> HttpResponse:
    access = namespace_access(request.user, ns)
    context = {**_ns_context(access, "operations"),
               "unsettled": observations_unsettled(namespace=access.namespace)}
    return render(request, "explorer/partials/observations.html", context)


# --- operation log ---------------------------------------------------------------------------


@login_required
@require_GET
def operations(request: HttpRequest, ns: str) -> HttpResponse:
    access = namespace_access(request.user, ns)
    form = LogFilter(request.GET)
    form.is_valid()  # a field in error is left out (and named); the others still filter
    data = form.cleaned_data
    filters = LogFilters(**{name: data.get(name) or "" for name in
                            ("key", "key_contains", "op", "actor", "source")})
    page = log_page(namespace=access.namespace, filters=filters,
                    before=data.get("before") or None, limit=LOG_PAGE)
    query = urlencode({k: v for k, v in vars(filters).items() if v})
    context = {
        **_ns_context(access, "operations"),
        "page": page, "ops": page.rows, "older": page.older, "filters": filters,
        "query": query, "op_types": LOG_TYPES, "form_errors": form.errors,
        "key": filters.key, "actor": filters.actor,
        "paged": bool(data.get("before")),
        "unsettled": observations_unsettled(namespace=access.namespace),
        "with_drops": observations_with_drops(namespace=access.namespace),
        "without_facts": observations_without_facts(namespace=access.namespace),
    }
    if _htmx_target(request) == "log-results":
        return render(request, "explorer/partials/log_results.html", context)
    return render(request, "explorer/operations.html", context)


# --- compare read modes ----------------------------------------------------------------------


@login_required
@require_GET
def read_compare(request: HttpRequest, ns: str) -> HttpResponse:
    access = namespace_access(request.user, ns)
    form = ReadForm(request.GET if "q" in request.GET else None)
    results: list[dict[str, Any]] = []
    if form.is_bound and form.is_valid():
        results = read_all(access.namespace, form.cleaned_data["q"], form.cleaned_data["k"],
                            form.cleaned_data["disclose"])
    modes = [{"name": m.name, "title": m.title, "help": MODE_HELP.get(m.name, ""),
              "agent": m.name == AGENT_MODE} for m in READ_MODES.values()]
    # A query the form refuses (a k of "abc", an unknown disclosure) is a 400 naming it.
    return render(request, "explorer/read.html",
                  {**_ns_context(access, "read"), "form": form, "results": results,
                   "modes": modes}, status=400 if form.is_bound and form.errors else 200)
