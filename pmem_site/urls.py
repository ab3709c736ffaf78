from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import include, path
from django.views import defaults
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from memory.api.errors import json_not_found, json_server_error
from pmem_site.health import healthz

urlpatterns = [
    path("healthz", healthz, name="healthz"),
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
    if request.path.startswith("/api/"):
        return json_server_error(request)
    return defaults.server_error(request)
