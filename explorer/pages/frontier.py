"""The frontier: every cell of a namespace with its current value, sortable and searched in
present and past values, and the observations that failed; or, with ``?as_of=``, the frontier
as it was then (SPEC §9), read-only and keyset-paged by key."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from explorer.access import Access, namespace_access
from explorer.forms import FRONTIER_FILTERS, FrontierFilter
from explorer.http import (
    answers_refusals,
    as_of,
    as_of_param,
    htmx_target,
    local_as_of,
    page_context,
)
from memory.selectors.frontier import frontier_as_of, frontier_page
from memory.selectors.observations import observations_unsettled

#: Cells a page of the frontier as of T shows.
PAST_PAGE = 50
#: The frontier table's columns: (sort name, heading).
FRONTIER_COLUMNS = (("key", "Key"), ("value", "Current value"), ("status", "Status"),
                    ("support", "Support"), ("changed", "Last change"))


def frontier_columns(sort: str) -> list[dict[str, str]]:
    """Each column's heading, its aria-sort and the sort a click on it asks for: the first
    click sorts in the column's natural direction (keys A–Z, newest change first), the next
    reverses it."""
    natural_desc = {"support", "changed"}
    columns = []
    for name, heading in FRONTIER_COLUMNS:
        active = sort.lstrip("-") == name
        reversed_ = sort.startswith("-")
        descending = (name in natural_desc) != reversed_
        columns.append({
            "name": name, "heading": heading,
            "aria_sort": ("descending" if descending else "ascending") if active else "none",
            "next": (name if reversed_ else f"-{name}") if active else name,
        })
    return columns


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
    context = {**page_context(access, "frontier"), "show": show, "q": search,
               "filters": FRONTIER_FILTERS}
    if show == "failed":
        context["failed"] = observations_unsettled(namespace=access.namespace, failed_only=True)
    else:
        context["page"] = frontier_page(namespace=access.namespace, show=show, search=search,
                                        sort=data.get("sort") or "", page=data.get("page") or 1)
        context["columns"] = frontier_columns(context["page"].sort)
    if htmx_target(request) == "frontier-results":
        return render(request, "explorer/partials/frontier_results.html", context)
    return render(request, "explorer/frontier.html", context)


@answers_refusals
def frontier_past(request: HttpRequest, access: Access) -> HttpResponse:
    """``/ns/{ns}/?as_of=…``: every cell's value, status and support as of then. The date
    field (``at``, in the browser's ``tz``) redirects to the canonical ``as_of``."""
    ns = access.namespace.name
    page = reverse("explorer:frontier", args=[ns])
    if request.GET.get("at"):
        typed = local_as_of(request.GET["at"], request.GET.get("tz", "UTC"))
        return redirect(f"{page}?{urlencode({'as_of': as_of_param(typed)})}")
    moment = as_of(request)
    if moment is None:  # a blank as_of: the present
        return redirect(page)
    after = request.GET.get("after") or None
    search = (request.GET.get("q") or "").strip()[:200]
    rows, next_after = frontier_as_of(access.namespace, moment, after=after or "",
                                      limit=PAST_PAGE, search=search or None)
    return render(request, "explorer/frontier_past.html", {
        **page_context(access, "frontier"), "can_act": False,
        "as_of": moment, "as_of_param": as_of_param(moment), "as_of_action": page,
        "as_of_local": moment.strftime("%Y-%m-%dT%H:%M:%S"), "present_url": page,
        "as_of_subject": f"The memory of {ns}", "rows": rows, "after": after,
        "next_after": next_after, "q": search})
