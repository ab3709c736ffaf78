"""The operation log: filtered pages newest first with their position, the observations not
committed yet or failed, those whose model answer had facts dropped, and those that yielded no
fact."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.http import urlencode
from django.views.decorators.http import require_GET

from explorer.access import namespace_access
from explorer.forms import LogFilter
from explorer.http import htmx_target, page_context
from memory.domain import LOG_TYPES
from memory.selectors.log import LogFilters, log_page
from memory.selectors.observations import (
    observations_unsettled,
    observations_with_drops,
    observations_without_facts,
)
from memory.selectors.undone import undo_marks

#: Operations a page of the log shows.
LOG_PAGE = 50


#: The filters a query string carries (the page's links and its exports keep them).
FILTER_FIELDS = ("key", "key_contains", "op", "actor", "source", "token", "since", "until", "tz")


def _filters(data: dict[str, Any]) -> LogFilters:
    return LogFilters(**{name: data.get(name) or "" for name in
                         ("key", "key_contains", "op", "actor", "source", "token")},
                      since=data.get("since_at"), until=data.get("until_at"))


def filter_query(data: dict[str, Any]) -> str:
    """The filters in force, as a query string (a field in error is left out)."""
    return urlencode({k: data[k] for k in FILTER_FIELDS if data.get(k)})


def log_filters(request: HttpRequest) -> LogFilters:
    """The log's filters from the page's form: a field in error is left out (and named by the
    form); the others still filter."""
    form = LogFilter(request.GET)
    form.is_valid()
    return _filters(form.cleaned_data)


@login_required
@require_GET
def operations(request: HttpRequest, ns: str) -> HttpResponse:
    access = namespace_access(request.user, ns)
    form = LogFilter(request.GET)
    form.is_valid()  # a field in error is left out (and named); the others still filter
    data = form.cleaned_data
    filters = _filters(data)
    page = log_page(namespace=access.namespace, filters=filters,
                    before=data.get("before") or None, limit=LOG_PAGE)
    query = filter_query(data)
    marks = undo_marks(access.namespace, [o.pk for o in page.rows])
    for o in page.rows:
        mark = marks.get(o.pk, {})
        o.undone_by = mark.get("undone_by")  # type: ignore[attr-defined]
        o.undoes = mark.get("undoes")  # type: ignore[attr-defined]
    context = {
        **page_context(access, "operations"),
        "page": page, "ops": page.rows, "older": page.older, "filters": filters,
        "query": query, "op_types": LOG_TYPES,
        "raw": {k: str(data.get(k) or "") for k in FILTER_FIELDS}, "form_errors": form.errors,
        "key": filters.key, "actor": filters.actor,
        "paged": bool(data.get("before")),
        "unsettled": observations_unsettled(namespace=access.namespace),
        "with_drops": observations_with_drops(namespace=access.namespace),
        "without_facts": observations_without_facts(namespace=access.namespace),
    }
    if htmx_target(request) == "log-results":
        return render(request, "explorer/partials/log_results.html", context)
    return render(request, "explorer/operations.html", context)
