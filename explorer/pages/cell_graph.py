"""The cell page's two drawings, each one bounded JSON request: a window of the provenance
graph (:func:`memory.selectors.graph.graph_window`, with the links the page adds to it) and the
timeline of the whole history in time buckets (:func:`memory.selectors.timeline.status_timeline`, every
bucket present so that time stays linear along the bar)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from django.views.decorators.http import require_GET

from explorer.access import namespace_access
from explorer.http import answers_refusals, as_of, as_of_param, int_param
from explorer.pages.cell import load_cell
from memory.domain import BadParameter
from memory.domain.wording import plain_reason
from memory.selectors.graph import SIDES, WINDOW_DEFAULT, WINDOW_MAX, graph_window
from memory.selectors.timeline import BUCKETS_DEFAULT, TICK, resolve_jump, status_timeline

#: The fewest time buckets a timeline may ask for (a phone's: each bar a finger wide).
BUCKETS_MIN = 4

if TYPE_CHECKING:  # the explorer reads through memory.selectors; the model is a type here
    from memory.models import Cell


def graph_json(cell: Cell, *, ns: str, around: int | None, limit: int, side: str | None,
               as_of: datetime | None) -> dict[str, Any]:
    """A window of the graph as graph.js draws it: the typed edges, an ``applied_to`` link
    from each operation to the version it created or targeted, observation pages, and for
    each operation the links to memory just before and just after it."""
    graph = graph_window(cell, around=around, limit=limit, side=side, as_of=as_of)
    version_ids = {n["id"] for n in graph["nodes"] if n["kind"] == "version"}
    derived = [{"source": n["id"], "target": f"v{n['version']}", "type": "applied_to"}
               for n in graph["nodes"] if n["kind"] == "operation" and n.get("version")
               and f"v{n['version']}" in version_ids]
    # An observation that supports no version shown (a retraction's "reported in error") is
    # linked to the operations it caused, so it does not float unexplained.
    supporting = {e["target"] for e in graph["edges"] if e["type"] == "supported_by"}
    evidence_ids = {n["id"] for n in graph["nodes"] if n["kind"] == "evidence"}
    derived += [{"source": n["id"], "target": f"e{n['evidence']}", "type": "caused_by"}
                for n in graph["nodes"] if n["kind"] == "operation" and n.get("evidence")
                and f"e{n['evidence']}" in evidence_ids - supporting]
    page = reverse("explorer:cell", args=[ns, cell.key])
    for node in graph["nodes"]:
        if node["kind"] == "evidence":
            node["page"] = reverse("explorer:observation", args=[ns, node["observation"]])
            node["observation_url"] = reverse("api-observation", args=[ns, node["observation"]])
        elif node["kind"] == "operation" and node.get("created_at"):
            node["reason_words"] = plain_reason(node.get("reason") or "")
            at = node["created_at"]
            node["asof_before"] = f"{page}?{urlencode({'as_of': as_of_param(at - TICK)})}"
            node["asof_after"] = f"{page}?{urlencode({'as_of': as_of_param(at)})}"
    return {"key": cell.key, "nodes": graph["nodes"], "edges": graph["edges"],
            "derived": derived, "window": graph["window"],
            "head": f"v{cell.head_id}" if cell.head_id and not as_of else None,
            "as_of": as_of_param(as_of) if as_of else None}


def timeline_json(cell: Cell, *, as_of: datetime | None,
                  buckets: int = BUCKETS_DEFAULT) -> dict[str, Any]:
    """The timeline in the shape timeline.js draws: every bucket, empty ones too."""
    data = status_timeline(cell, buckets=buckets, as_of=as_of)
    start, end = data["start"], data["end"]
    by_bucket = {b["bucket"]: b for b in data["bins"]}
    out = []
    if start is not None and end is not None:
        span = (end - start) / buckets
        for i in range(1, buckets + 1):
            b = by_bucket.get(i)
            out.append({"start": start + span * (i - 1), "end": start + span * i,
                        "total": sum(b["counts"].values()) if b else 0,
                        "counts": b["counts"] if b else {},
                        "first": b["first_version"] if b else None,
                        "last": b["last_version"] if b else None,
                        "first_ordinal": b["first_ordinal"] if b else None,
                        "last_ordinal": b["last_ordinal"] if b else None})
    return {"key": cell.key, "versions": data["total"], "buckets": out,
            "as_of": data["as_of"]}


@login_required
@require_GET
@answers_refusals
def cell_graph(request: HttpRequest, ns: str, key: str) -> HttpResponse:
    """A window of the graph: ``around`` (a version id; default the head), ``limit``
    versions (default 40, at most 500), ``side`` (older / newer: the versions beyond
    ``around`` on that side only), ``jump`` (v12, id 345 or a date), ``as_of``."""
    access = namespace_access(request.user, ns)
    moment = as_of(request)
    cell = load_cell(access, key)
    limit = int_param(request, "limit", WINDOW_DEFAULT, maximum=WINDOW_MAX) or WINDOW_DEFAULT
    around = int_param(request, "around")
    side = request.GET.get("side", "")
    if side not in ("", *SIDES):
        raise BadParameter("side", "older or newer")
    focus = None
    if request.GET.get("jump"):
        around = resolve_jump(cell=cell, text=request.GET["jump"], as_of=moment)
        focus = f"v{around}"
    graph = graph_json(cell, ns=ns, around=around, limit=limit, side=side or None, as_of=moment)
    if focus:
        graph["focus"] = focus
    return JsonResponse(graph, encoder=DjangoJSONEncoder)


@login_required
@require_GET
@answers_refusals
def cell_timeline(request: HttpRequest, ns: str, key: str) -> HttpResponse:
    """The compact timeline of the whole chain: counts by time bucket and status, in
    ``buckets`` stretches (default 60; fewer on a narrow screen, where each bar is a finger
    wide)."""
    access = namespace_access(request.user, ns)
    moment = as_of(request)
    buckets = int_param(request, "buckets", BUCKETS_DEFAULT, maximum=BUCKETS_DEFAULT)
    if buckets is None or buckets < BUCKETS_MIN:
        raise BadParameter("buckets", f"a whole number from {BUCKETS_MIN} to {BUCKETS_DEFAULT}")
    return JsonResponse(timeline_json(load_cell(access, key), as_of=moment, buckets=buckets),
                        encoder=DjangoJSONEncoder)
