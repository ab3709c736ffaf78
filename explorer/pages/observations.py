"""Observations in the explorer: one whole (text, facts, what it did: where the graph and the
lists, which show only the head of a text, link to), the list of those not committed yet or
failed, a new observation typed by a reviewer, and the retry of a failed one."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import trigger_client_event

from explorer.access import namespace_access, require_reviewer
from explorer.forms import ObservationForm
from explorer.http import actor, is_htmx, page_context, same_origin_path
from explorer.pages.cell import panel_response
from memory.selectors.observations import (
    observation_page,
    observation_state,
    observation_yield,
    observations_unsettled,
)
from memory.services import observation_record, observation_retry
from memory.tasks import enqueue_observation


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
            return panel_response(request, access, key, status=422, obs_form=form,
                                  error="The observation needs text.")
        return redirect("explorer:operations", ns=ns)
    recorded = observation_record(namespace=access.namespace, text=form.cleaned_data["text"],
                                  source=form.cleaned_data["source"] or "explorer",
                                  actor=actor(request))
    enqueue_observation(recorded.evidence.pk)
    if key:
        return panel_response(request, access, key, message=(
            f"Observation #{recorded.evidence.seq} recorded; it shows here once a worker "
            "commits it."))
    return redirect("explorer:operations", ns=ns)


@login_required
@require_POST
def observation_retry_view(request: HttpRequest, ns: str, evidence_id: int) -> HttpResponse:
    access = namespace_access(request.user, ns)
    require_reviewer(access)
    evidence = observation_state(namespace=access.namespace, pk=evidence_id)
    if evidence is None:
        raise Http404("no such observation")
    if observation_retry(evidence=evidence):
        enqueue_observation(evidence.pk)
    if is_htmx(request):
        context = {**page_context(access, "operations"),
                   "unsettled": observations_unsettled(namespace=access.namespace)}
        response = render(request, "explorer/partials/observations.html", context)
        return trigger_client_event(response, "pmem-changed")
    return redirect(same_origin_path(request.POST.get("next"))
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
        **page_context(access, "operations"), "page": page, "e": page.evidence,
        "no_fact": observation_yield(page.evidence),
        "api_url": reverse("api-observation", args=[ns, evidence_id])})


@login_required
@require_GET
def observations_fragment(request: HttpRequest, ns: str) -> HttpResponse:
    access = namespace_access(request.user, ns)
    context = {**page_context(access, "operations"),
               "unsettled": observations_unsettled(namespace=access.namespace)}
    return render(request, "explorer/partials/observations.html", context)
