"""Accounts: Django's login, logout and password change, and password reset by email — only
where an email backend is configured (``PMEM_PASSWORD_RESET``), and throttled like logins.

Without a way to send mail a reset form can only fail (Django's default backend tries SMTP on
localhost:25), so its four URLs answer 404 then. With one, every request for a reset link
counts against the client's address and against the email address asked for; past
``AXES_FAILURE_LIMIT`` of either within ``AXES_COOLOFF_TIME`` the form answers 429 and sends
nothing. Counting the email address too keeps anyone from flooding one person's inbox from
many addresses.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.core.cache import cache
from django.http import Http404, HttpRequest, HttpResponseBase
from django.shortcuts import render
from django.urls import path, reverse_lazy

from pmem_site.security import client_ip

log = logging.getLogger("pmem.accounts")
View = Callable[..., HttpResponseBase]


def _reset_only(view: View) -> View:
    def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not settings.PMEM_PASSWORD_RESET:
            raise Http404("password reset is not configured")
        return view(request, *args, **kwargs)

    return guarded


def _counted(request: HttpRequest) -> bool:
    """Count this request for a reset link; True when the address or the email address asked
    for is over the limit. An unreachable cache lets it through, logged (a limit
    must not turn a Redis outage into errors)."""
    email = (request.POST.get("email") or "").strip().casefold()
    keys = [f"pmem-reset:addr:{client_ip(request) or '-'}",
            "pmem-reset:email:" + hashlib.sha256(email.encode()).hexdigest()]
    window = int(settings.AXES_COOLOFF_TIME.total_seconds())
    try:
        counts = []
        for key in keys:
            cache.add(key, 0, timeout=window)  # the window starts with the first request
            counts.append(cache.incr(key))
    except Exception:  # noqa: BLE001 - any cache failure: let the request through
        log.warning("password reset throttle skipped: the cache did not answer", exc_info=True)
        return False
    return max(counts) > settings.AXES_FAILURE_LIMIT


_reset_form = auth_views.PasswordResetView.as_view()


@_reset_only
def password_reset(request: HttpRequest) -> HttpResponseBase:
    if request.method == "POST" and _counted(request):
        return render(request, "registration/reset_throttled.html", status=429)
    return _reset_form(request)


urlpatterns = [
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("password_change/", auth_views.PasswordChangeView.as_view(), name="password_change"),
    path("password_change/done/", auth_views.PasswordChangeDoneView.as_view(),
         name="password_change_done"),
    path("password_reset/", password_reset, name="password_reset"),
    path("password_reset/done/", _reset_only(auth_views.PasswordResetDoneView.as_view()),
         name="password_reset_done"),
    path("reset/<uidb64>/<token>/", _reset_only(auth_views.PasswordResetConfirmView.as_view(
        success_url=reverse_lazy("password_reset_complete"))), name="password_reset_confirm"),
    path("reset/done/", _reset_only(auth_views.PasswordResetCompleteView.as_view()),
         name="password_reset_complete"),
]
