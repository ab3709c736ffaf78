"""The cells of the HTTP API (CONTRACT "Cells", "Long histories and time travel"): pages of
cells, a cell, its graph window, history and timeline (now or as of a past time), the privacy
erase, and a person's typed operation. Thin like :mod:`memory.api.views`."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, status
from rest_framework.request import Request
from rest_framework.response import Response

from memory.domain import CellStatus
from memory.domain.instants import parse_instant
from memory.selectors.cells import cell_as_of, cells_page
from memory.selectors.frontier import frontier_as_of
from memory.selectors.graph import WINDOW_DEFAULT, WINDOW_MAX, graph_window
from memory.selectors.history import HISTORY_DEFAULT, HISTORY_MAX, SEARCH_COUNT_CAP, history_page
from memory.selectors.log import operation_row
from memory.selectors.timeline import BUCKETS_DEFAULT, BUCKETS_MAX, status_timeline
from memory.services import cell_erase, operation_apply
from memory.services.ordinals import UnknownOrdinal, version_reference
from memory.tasks import enqueue_erase_followup

from . import graph_outputs as g
from . import outputs as o
from . import serializers as s
from .auth import actor_of
from .base import NamespaceView
from .params import (
    bounded_int,
    metadata_filter,
    next_url,
    page_limit,
    version_id,
    zero_or_one,
)
from .permissions import ReadScope, ReviewScope
from .views import REFUSALS

AS_OF = OpenApiParameter("as_of", str, description="ISO-8601 time with a zone: memory as it "
                                                   "was then")


def _as_of(request: Request) -> Any:
    return parse_instant(request.query_params.get("as_of"), field="as_of")


def _cell(state: Any) -> dict[str, Any]:
    """A cell's answer: its head, alternatives and history entries carry their ordinals,
    metadata and expiry as the selector read them."""
    return o.CellOut.render(state)


class CellsView(NamespaceView):
    scopes = {"GET": ReadScope}

    @extend_schema(
        responses={**REFUSALS, 200: o.CellListOut},
        summary="List cells (keyset-paginated by key)", operation_id="cells_list",
        parameters=[OpenApiParameter("status", str, enum=[s.value for s in CellStatus]),
                    OpenApiParameter("search", str), OpenApiParameter("after", str),
                    OpenApiParameter("limit", int),
                    OpenApiParameter("history", int, description="history entries per cell"),
                    OpenApiParameter("as_of", str, description="the frontier as of this time"),
                    OpenApiParameter("filter", str, description=(
                        "a JSON object: only cells whose current version's metadata holds "
                        "each of its entries, e.g. {\"user\": \"alice\"}"))],
    )
    def get(self, request: Request, ns: str) -> Response:
        namespace = self.namespace(request, ns)
        params = request.query_params
        metadata = metadata_filter(params)
        status_ = params.get("status")
        if status_ not in (None, "", *CellStatus):
            *first, last = (status.value for status in CellStatus)
            raise exceptions.ValidationError({"status": f"{', '.join(first)} or {last}"})
        limit = page_limit(request)
        as_of = _as_of(request)
        history = bounded_int(params, "history", default=HISTORY_DEFAULT, low=0,
                              high=HISTORY_MAX)
        search, after = params.get("search") or None, params.get("after") or None
        rows: list[Any]
        if as_of is not None:
            # SPEC §9: each cell's value and status then, and how many versions it held (its
            # history as of T is one request away).
            rows, after = frontier_as_of(namespace, as_of, after=after or "", limit=limit,
                                         status=status_ or None, search=search,
                                         metadata=metadata)
        else:
            rows, after = cells_page(namespace=namespace, status=status_ or None,
                                     search=search, after=after, limit=limit, history=history,
                                     metadata=metadata)
        return Response(o.CellListOut.render({
            "results": rows, "next": next_url(request, after=after) if after else None,
            "as_of": as_of}))


class CellDetailView(NamespaceView):
    scopes = {"GET": ReadScope, "DELETE": ReviewScope}

    @extend_schema(responses={**REFUSALS, 200: o.CellOut},
                   summary="A cell: current value, alternatives, history",
                   operation_id="cell_get",
                   parameters=[OpenApiParameter("history", int, description=(
                       "history entries in the answer (default 50, max 1000)")), AS_OF])
    def get(self, request: Request, ns: str, key: str) -> Response:
        """The cell now or as of T, with at most ``history`` entries of its history (SPEC
        §10). A key that had no version yet at T answers the empty cell; an erased key has no
        past (404)."""
        history = bounded_int(request.query_params, "history", default=HISTORY_DEFAULT,
                              low=0, high=HISTORY_MAX)
        state = cell_as_of(self.namespace(request, ns), key, _as_of(request), history=history)
        if state is None:
            raise exceptions.NotFound(f"no cell with key {key!r}")
        return Response(_cell(state))

    @extend_schema(request=None, responses={**REFUSALS, 204: None, 200: o.EraseReportOut},
                   parameters=[OpenApiParameter("report", int, description=(
                       "1: answer 200 with what was redacted and where else in the namespace "
                       "the erased values still appear"))],
                   summary="Privacy erase (SPEC §6): the key and its values are gone for good",
                   operation_id="cell_erase")
    def delete(self, request: Request, ns: str, key: str) -> Response:
        namespace = self.namespace(request, ns)
        report = zero_or_one(request.query_params, "report")
        erased = cell_erase(namespace=namespace, key=key, actor=actor_of(request), report=report)
        enqueue_erase_followup()
        if report:
            return Response(o.EraseReportOut.render(erased.report()))
        return Response(status=status.HTTP_204_NO_CONTENT)


class CellGraphView(NamespaceView):
    scopes = {"GET": ReadScope}

    @extend_schema(
        responses={**REFUSALS, 200: g.GraphOut}, operation_id="cell_graph",
        summary="A window of the cell's provenance graph (around a version, as of a time)",
        parameters=[OpenApiParameter("around", int, description="a version id (default the head)"),
                    OpenApiParameter("limit", int, description="versions (default 40, max 500)"),
                    AS_OF])
    def get(self, request: Request, ns: str, key: str) -> Response:
        params = request.query_params
        around = version_id(params, "around")
        limit = bounded_int(params, "limit", default=WINDOW_DEFAULT, low=1, high=WINDOW_MAX)
        as_of = _as_of(request)
        cell = self.cell(self.namespace(request, ns), key)
        graph = graph_window(cell, around=around, limit=limit, as_of=as_of)
        for node in graph["nodes"]:  # an evidence node carries the head of its text
            if node["kind"] == "evidence":
                node["observation_url"] = request.build_absolute_uri(
                    reverse("api-observation", args=[ns, node["observation"]]))
        return Response(g.GraphOut.render(graph))


class CellHistoryView(NamespaceView):
    scopes = {"GET": ReadScope}

    @extend_schema(
        responses={**REFUSALS, 200: o.HistoryPageOut}, operation_id="cell_history",
        summary="A page of the cell's history, newest first (keyset cursor, value search)",
        parameters=[OpenApiParameter("before", str, description="the cursor `next` gave"),
                    OpenApiParameter("limit", int, description="default 50, max 1000"),
                    AS_OF, OpenApiParameter("search", str, description="words the value holds")])
    def get(self, request: Request, ns: str, key: str) -> Response:
        params = request.query_params
        limit = bounded_int(params, "limit", default=HISTORY_DEFAULT, low=1, high=HISTORY_MAX)
        as_of = _as_of(request)
        search = params.get("search") or None
        if search is not None and len(search) > 200:
            raise exceptions.ValidationError({"search": "at most 200 characters"})
        cell = self.cell(self.namespace(request, ns), key)
        page = history_page(cell, before=params.get("before") or None, limit=limit,
                            as_of=as_of, search=search)
        return Response(o.HistoryPageOut.render({
            "results": page.entries, "next": page.next, "total": page.total,
            "next_url": next_url(request, before=page.next) if page.next else None,
            "total_capped": search is not None and page.total >= SEARCH_COUNT_CAP,
            "as_of": as_of}))


class CellTimelineView(NamespaceView):
    scopes = {"GET": ReadScope}

    @extend_schema(
        responses={**REFUSALS, 200: o.TimelineOut}, operation_id="cell_timeline",
        summary="The whole history in a few buckets of time, counted by status",
        parameters=[OpenApiParameter("buckets", int, description="default 60, max 500"), AS_OF])
    def get(self, request: Request, ns: str, key: str) -> Response:
        buckets = bounded_int(request.query_params, "buckets", default=BUCKETS_DEFAULT, low=1,
                              high=BUCKETS_MAX)
        as_of = _as_of(request)
        cell = self.cell(self.namespace(request, ns), key)
        return Response(o.TimelineOut.render(status_timeline(cell, buckets=buckets, as_of=as_of)))


class CellOperationsView(NamespaceView):
    scopes = {"POST": ReviewScope}

    @extend_schema(request=s.CellOpIn, responses={**REFUSALS, 201: g.CellOpOut, 409: o.ErrorOut},
                   summary="Apply a typed operation to a cell (409 when invalid in its state)",
                   operation_id="cell_operation_create")
    def post(self, request: Request, ns: str, key: str) -> Response:
        namespace = self.namespace(request, ns)
        problem = s.key_problem(key)
        if problem:  # an operation may create the cell: its key must be one (SPEC §1)
            raise exceptions.ValidationError({"key": problem})
        data = s.CellOpIn(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        version = v.get("version")
        if isinstance(version, str):  # "v3": the key's own numbering (SPEC §11.5)
            try:
                version = version_reference(cell_id=self.cell(namespace, key).pk,
                                            version=version)
            except UnknownOrdinal as unknown:
                return Response({"error": str(unknown), "field": "version"},
                                status=status.HTTP_409_CONFLICT)
        applied = operation_apply(
            namespace=namespace, key=key, op=v["op"], value=v.get("value"),
            version_id=version, actor=actor_of(request), reason=v.get("reason", ""),
            explicit=True, metadata=v.get("metadata"),
        )
        cell = cell_as_of(namespace, applied.cell.key, None) if applied.cell else None
        body = g.CellOpOut.render({"operation": operation_row(applied.operation.pk),
                                   "cell": cell})
        return Response(body, status=status.HTTP_201_CREATED)
