"""Members and API tokens of a namespace, managed in the browser by its admins.

``/ns/{ns}/access/`` lists the members (with their roles), the tokens (prefix, name, scope,
the sources they are bound to, creator, last use; never a secret — the database has none),
the sources' trust levels and the access audit log. A new
token's secret is shown once, in the answer to the form that made it (``Cache-Control:
no-store``), and never again. Every change is a row of the audit log (memory.services).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from explorer.access import Access, namespace_access, require_admin
from explorer.forms import MemberForm, TokenForm
from explorer.http import actor, page_context
from memory.selectors.access import (
    audit_list,
    members_list,
    source_trust_list,
    token_in,
    token_row,
    tokens_list,
)
from memory.services import (
    LastAdmin,
    membership_remove,
    membership_set,
    namespace_delete,
    token_create,
    token_revoke,
)
from memory.tasks import enqueue_namespace_followup


def _admin_access(request: HttpRequest, ns: str) -> Access:
    access = namespace_access(request.user, ns)
    require_admin(access)
    return access


def _page(request: HttpRequest, access: Access, *, status: int = 200,
          **extra: Any) -> HttpResponse:
    namespace = access.namespace
    context = {
        **page_context(access, "access"),
        "members": members_list(namespace=namespace),
        "tokens": [token_row(t) for t in tokens_list(namespace=namespace)],
        "audit": audit_list(namespace=namespace),
        "trust": source_trust_list(namespace=namespace),
        "token_form": extra.pop("token_form", None) or TokenForm(),
        "member_form": extra.pop("member_form", None) or MemberForm(),
        **extra,
    }
    return render(request, "explorer/access.html", context, status=status)


@never_cache
@login_required
@require_GET
def access_page(request: HttpRequest, ns: str) -> HttpResponse:
    return _page(request, _admin_access(request, ns))


@never_cache  # no-store: the one answer that holds a secret
@login_required
@require_POST
def token_add(request: HttpRequest, ns: str) -> HttpResponse:
    """Make a token and show its secret once, in this answer (not a redirect: the secret must
    not travel in a URL or wait in a session)."""
    access = _admin_access(request, ns)
    form = TokenForm(request.POST)
    if not form.is_valid():
        return _page(request, access, status=422, token_form=form)
    data = form.cleaned_data
    days = data["expires_days"]
    token = token_create(
        namespace=access.namespace, scope=data["scope"], name=data["name"], client=data["name"],
        created_by=request.user if isinstance(request.user, User) else None,
        actor=actor(request), sources=data["sources"],
        expires_at=timezone.now() + timedelta(days=days) if days else None)
    return _page(request, access, new_token={"secret": token.key, **token_row(token)})


@login_required
@require_POST
def token_remove(request: HttpRequest, ns: str, token_id: int) -> HttpResponse:
    access = _admin_access(request, ns)
    token = token_in(namespace=access.namespace, token_id=token_id)
    if token is None:
        raise Http404("no such token")
    token_revoke(token=token, actor=actor(request))
    return redirect("explorer:access", ns=ns)


@login_required
@require_POST
def member_set(request: HttpRequest, ns: str) -> HttpResponse:
    access = _admin_access(request, ns)
    form = MemberForm(request.POST)
    if not form.is_valid():
        return _page(request, access, status=422, member_form=form)
    user = get_user_model().objects.filter(username=form.cleaned_data["username"]).first()
    if user is None:
        form.add_error("username", "No user with this name; an administrator creates accounts.")
        return _page(request, access, status=422, member_form=form)
    try:
        membership_set(namespace=access.namespace, user=user, role=form.cleaned_data["role"],
                       actor=actor(request))
    except LastAdmin as exc:
        return _page(request, access, status=409, error=str(exc))
    return redirect("explorer:access", ns=ns)


@login_required
@require_POST
def member_remove(request: HttpRequest, ns: str, user_id: int) -> HttpResponse:
    access = _admin_access(request, ns)
    user = get_user_model().objects.filter(pk=user_id).first()
    if user is None:
        raise Http404("no such member")
    try:
        if not membership_remove(namespace=access.namespace, user=user, actor=actor(request)):
            raise Http404("no such member")
    except LastAdmin as exc:
        return _page(request, access, status=409, error=str(exc))
    return redirect("explorer:access", ns=ns)


@login_required
@require_POST
def namespace_remove(request: HttpRequest, ns: str) -> HttpResponse:
    """Delete the namespace and everything in it (SPEC §13): an admin's, confirmed by typing
    its name (a click alone never deletes a memory)."""
    access = _admin_access(request, ns)
    if request.POST.get("confirm", "") != access.namespace.name:
        return _page(request, access, status=400,
                     error=f"Nothing was deleted: type {access.namespace.name} exactly to "
                           "confirm.")
    namespace_delete(namespace=access.namespace, actor=actor(request))
    enqueue_namespace_followup()
    return redirect("explorer:index")
