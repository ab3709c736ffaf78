"""A namespace's webhooks, managed in the browser by its admins (CONTRACT "Change events").

``/ns/{ns}/webhooks/`` lists the endpoints — URL, the ops they receive, state (delivering,
failing, paused), how far behind the namespace's last event they are — each with its last
delivery attempts; an admin makes, deletes and resumes them. A new endpoint's signing secret is
shown once, in the answer to the form that made it (``Cache-Control: no-store``).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from explorer.access import Access, namespace_access, require_admin
from explorer.forms import WebhookForm
from explorer.http import actor, page_context
from memory.domain.webhooks import EVENT_OPS
from memory.selectors.webhooks import webhook_deliveries, webhook_get, webhook_rows
from memory.services.webhooks import TargetRefused, webhook_create, webhook_delete, webhook_resume


def _admin_access(request: HttpRequest, ns: str) -> Access:
    access = namespace_access(request.user, ns)
    require_admin(access)
    return access


def _page(request: HttpRequest, access: Access, *, status: int = 200,
          **extra: Any) -> HttpResponse:
    endpoints = webhook_rows(namespace=access.namespace)
    for row in endpoints:
        row["deliveries"] = webhook_deliveries(endpoint_id=row["id"], limit=5)
    context = {
        **page_context(access, "webhooks"),
        "endpoints": endpoints,
        "form": extra.pop("form", None) or WebhookForm(),
        "event_ops": EVENT_OPS,
        **extra,
    }
    return render(request, "explorer/webhooks.html", context, status=status)


def _endpoint(access: Access, endpoint_id: int) -> Any:
    endpoint = webhook_get(namespace=access.namespace, endpoint_id=endpoint_id)
    if endpoint is None:
        raise Http404("no such webhook")
    return endpoint


@never_cache
@login_required
@require_GET
def webhooks_page(request: HttpRequest, ns: str) -> HttpResponse:
    return _page(request, _admin_access(request, ns))


@never_cache  # no-store: the one answer that holds the secret
@login_required
@require_POST
def webhook_add(request: HttpRequest, ns: str) -> HttpResponse:
    access = _admin_access(request, ns)
    form = WebhookForm(request.POST)
    if not form.is_valid():
        return _page(request, access, status=422, form=form)
    try:
        endpoint = webhook_create(namespace=access.namespace, url=form.cleaned_data["url"],
                                  ops=form.cleaned_data["ops"], actor=actor(request))
    except (TargetRefused, ValueError) as exc:
        form.add_error("url" if isinstance(exc, TargetRefused) else "ops", str(exc))
        return _page(request, access, status=422, form=form)
    return _page(request, access, new_webhook={"id": endpoint.pk, "url": endpoint.url,
                                               "secret": endpoint.secret})


@login_required
@require_POST
def webhook_remove(request: HttpRequest, ns: str, endpoint_id: int) -> HttpResponse:
    access = _admin_access(request, ns)
    webhook_delete(endpoint=_endpoint(access, endpoint_id), actor=actor(request))
    return redirect("explorer:webhooks", ns=ns)


@login_required
@require_POST
def webhook_resume_view(request: HttpRequest, ns: str, endpoint_id: int) -> HttpResponse:
    access = _admin_access(request, ns)
    webhook_resume(endpoint=_endpoint(access, endpoint_id), actor=actor(request))
    return redirect("explorer:webhooks", ns=ns)
