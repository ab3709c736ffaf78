from __future__ import annotations

import sys

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.urls import include, path
from django.views import defaults
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from memory.api.errors import (
    database_outage,
    json_not_found,
    json_server_error,
    json_unavailable,
    outage_message,
    retry_after,
)
from pmem_site.health import healthz, livez
from pmem_site.metrics import metrics_view

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("livez", livez, name="livez"),
    path("metrics", metrics_view, name="metrics"),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves Swagger UI's start-up script from a URL: no inline script (CSP).
    path("api/docs/", SpectacularSwaggerSplitView.as_view(
        url_name="api-schema", template_name="api/swagger_ui.html"), name="api-docs"),
    path("api/v1/", include("memory.api.urls")),
    path("", include("explorer.urls")),  # the explorer, and accounts/ (login, logout)
]


def handler404(request: HttpRequest, exception: Exception) -> HttpResponse:
    if request.path.startswith("/api/"):
        return json_not_found(request, exception)
    return defaults.page_not_found(request, exception)


def handler500(request: HttpRequest) -> HttpResponse:
    """Uncaught exceptions, of views and of middleware alike (Django calls this inside its
    ``except`` block): a database that cannot be reached is a 503, anything else a 500."""
    outage = database_outage(sys.exc_info()[1])
    if outage is not None:
        return _unavailable(request, outage)
    if request.path.startswith("/api/"):
        return json_server_error(request)
    return defaults.server_error(request)


def _unavailable(request: HttpRequest, cause: str) -> HttpResponse:
    if request.path.startswith("/api/") or "application/json" in request.headers.get(
            "Accept", ""):
        return json_unavailable(cause)
    json_unavailable(cause)  # counted once, like the API's
    # Rendered without the request: its context processors would ask the database (the user).
    page = render_to_string("503.html", {"message": outage_message(cause),
                                         "retry_after": retry_after(),
                                         "request_path": request.path})
    response = HttpResponse(page, status=503)
    response["Retry-After"] = str(retry_after())
    return response
