"""The frontier as of a past moment (SPEC §9): read-only, keyset-paged by key."""

from __future__ import annotations

from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from explorer.access import Access
from explorer.cell_reads import BadParameter, as_of_param, local_as_of, parse_as_of
from explorer.history_shim import frontier_page_as_of
from explorer.selectors import live_fingerprint

FRONTIER_PAGE = 50


def frontier_past(request: HttpRequest, access: Access) -> HttpResponse:
    """``/ns/{ns}/?as_of=…``: every cell's value, status and support as of then. The date
    field (``at``, in the browser's ``tz``) redirects to the canonical ``as_of``."""
    ns = access.namespace.name
    page = reverse("explorer:frontier", args=[ns])
    try:
        if request.GET.get("at"):
            moment = local_as_of(request.GET["at"], request.GET.get("tz", "UTC"))
            return redirect(f"{page}?{urlencode({'as_of': as_of_param(moment)})}")
        as_of = parse_as_of(request.GET.get("as_of"))
    except BadParameter as exc:
        return render(request, "explorer/bad_parameter.html", {"error": exc}, status=400)
    if as_of is None:  # a blank as_of: the present
        return redirect(page)
    after = request.GET.get("after") or None
    search = (request.GET.get("q") or "").strip()[:200]
    rows, next_after = frontier_page_as_of(access.namespace, as_of=as_of, after=after,
                                           limit=FRONTIER_PAGE, search=search)
    return render(request, "explorer/frontier_past.html", {
        "ns": access.namespace, "role": access.role, "can_act": False,
        "can_manage": access.can_manage, "section": "frontier",
        "fingerprint": live_fingerprint(access.namespace),
        "as_of": as_of, "as_of_param": as_of_param(as_of), "as_of_action": page,
        "as_of_local": as_of.strftime("%Y-%m-%dT%H:%M:%S"), "present_url": page,
        "as_of_subject": f"The memory of {ns}", "rows": rows, "after": after,
        "next_after": next_after, "q": search})
