"""The pages around the namespaces: the list of those a user sees (with counts and the model's
state), the glossary, and the live poller every namespace page runs."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET
from django_htmx.http import trigger_client_event

from explorer.access import namespace_access
from memory.llm.check import model_status
from memory.llm.client import client_from_settings
from memory.selectors.access import member_roles, visible_namespaces
from memory.selectors.frontier import namespace_overview
from memory.selectors.log import live_fingerprint


@login_required
@require_GET
def index(request: HttpRequest) -> HttpResponse:
    namespaces = list(visible_namespaces(request.user).order_by("name"))
    rows = namespace_overview(namespaces, member_roles(user_id=request.user.pk))
    return render(request, "explorer/index.html", {"rows": rows, "model": _model_status()})


@require_GET
def glossary(request: HttpRequest) -> HttpResponse:
    """The words the explorer uses, a sentence each; open to anyone (it tells nothing about any
    namespace), so the login page can link to it too."""
    return render(request, "explorer/glossary.html", {"section": "glossary"})


def _model_status() -> dict[str, Any] | None:
    """The chat model and its structured-output form, as /healthz shows them (one short
    probe when this process has not talked to the model yet)."""
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
