"""The HTTP API of CONTRACT.md: one APIView per operation, thin — validate, call a service or
a selector, shape the answer. Errors are raised and mapped in ``memory.api.errors``."""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.db.models import BooleanField, ExpressionWrapper, Func, IntegerField, Q
from django.db.models.fields.json import KT, KeyTransform
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory import filtered, reads, selectors
from memory import history as memory_history
from memory.domain import LOG_TYPES, SETTLED_STATES, CellStatus
from memory.domain.metadata import Metadata, MetadataRefused, parse_filter
from memory.domain.render import CellText, render_cell
from memory.domain.scopes import Scope
from memory.history import HISTORY_DEFAULT
from memory.llm.client import client_from_settings
from memory.models import Cell, Evidence, KeyAlias, Operation, Version
from memory.services import (
    cell_erase,
    observation_record,
    observation_retry,
    operation_apply,
    source_claim,
)
from memory.tasks import queue_observation

from . import serializers as s
from . import versions
from .auth import TokenClient, actor_of, caller_scope, namespace_for, token_of
from .errors import PayloadTooLarge
from .params import bounded_int, parse_as_of, version_id
from .permissions import ReadScope, ReviewScope, ScopePermission, UndeclaredScope, WriteScope
from .schema import ScopedAutoSchema
from .throttles import TokenRateThrottle

log = logging.getLogger("pmem.api")
WAIT_SECONDS = 30.0


class ScopedView(APIView):
    """Base of every API view: each method declares the scope it needs (``scopes``: method →
    permission class, memory.api.permissions); the schema states it; tokens are rate-limited
    when PMEM_API_RATE is set."""

    scopes: dict[str, type[ScopePermission]] = {}
    schema = ScopedAutoSchema()
    throttle_classes = [TokenRateThrottle]

    def get_permissions(self) -> list[Any]:
        method = (self.request.method or "").upper()
        if method == "HEAD":
            method = "GET"
        declared = self.scopes.get(method)
        if declared is not None:
            return [declared()]
        if method != "OPTIONS" and hasattr(self, method.lower()):
            return [UndeclaredScope()]  # a handler nobody declared a scope for: fail closed
        return [ReadScope()]  # OPTIONS, or no handler: 405 follows for the authenticated

    @property
    def required_scope(self) -> Scope:
        declared = self.scopes.get((self.request.method or "").upper(), ReviewScope)
        return declared.scope


class WhoAmIView(ScopedView):
    scopes = {"GET": ReadScope}

    @extend_schema(responses=s.WhoAmIOut, operation_id="whoami",
                   summary="The namespace, scope and client of the token that asks")
    def get(self, request: Request) -> Response:
        user = request.user
        if not isinstance(user, TokenClient):
            return Response({"error": "whoami describes an API token; send one",
                             "field": "Authorization"}, status=status.HTTP_400_BAD_REQUEST)
        token = user.token
        return Response({"namespace": token.namespace.name if token.namespace else None,
                         "namespace_prefix": token.namespace_prefix or None,
                         "scope": token.scope,
                         "client": token.client, "name": token.name, "prefix": token.prefix,
                         "expires_at": token.expires_at, "sources": list(token.sources)})


class NamespaceView(ScopedView):
    """Base: refuses oversize bodies before parsing; resolves the namespace per request."""

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        length = _digits(request.META.get("CONTENT_LENGTH") or "0")
        if length is not None and length > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
            raise PayloadTooLarge(
                f"request body over {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes")
        # PostgreSQL text cannot hold NUL: refuse it here rather than fail in a query.
        for name, values in request.query_params.lists():
            if any("\x00" in value for value in values):
                raise exceptions.ValidationError({name: "Null characters are not allowed."})
        super().initial(request, *args, **kwargs)

    def namespace(self, request: Request, ns: str, *, create: bool = False) -> Any:
        return namespace_for(request, ns, scope=self.required_scope, create=create)

    def reachable(self, request: Request, ns: str) -> Any:
        """The namespace, or None for one an application token reaches that does not exist
        yet (its first write creates it); 404 for every other namespace the caller cannot
        see, before the body is looked at."""
        return namespace_for(request, ns, scope=self.required_scope, missing_ok=True)

    def evidence(self, namespace: Any, pk: int) -> Evidence:
        evidence = (Evidence.objects.filter(namespace=namespace, pk=pk)
                    .defer("extracted", "embedding").first() if pk <= s.BIGINT_MAX else None)
        if evidence is None:
            raise exceptions.NotFound("no such observation")
        return evidence


def _digits(raw: str) -> int | None:
    """A non-negative integer written in ASCII digits, else None. (``str.isdigit`` alone is
    true of '²' and '①', which ``int`` refuses; and ``int`` alone takes '٣', '+3', ' 3'.)"""
    return int(raw) if raw.isascii() and raw.isdigit() else None


def _limit(request: Request, default: int = 50) -> int:
    limit = _digits(request.query_params.get("limit", str(default)))
    if limit is None or not 1 <= limit <= 500:
        raise exceptions.ValidationError({"limit": "an integer from 1 to 500"})
    return limit


def _next_url(request: Request, **params: Any) -> str:
    query = {k: v for k, v in request.query_params.items() if k not in params}
    query.update(params)
    return request.build_absolute_uri(request.path) + "?" + urlencode(query)


# --- observations ----------------------------------------------------------------------------


def observation_body(evidence: Evidence) -> dict[str, Any]:
    body = _observation_body(evidence)
    versions.attach(references=body["operations"])
    return body


def _observation_body(evidence: Evidence) -> dict[str, Any]:
    ops = list(Operation.objects.filter(evidence=evidence).order_by("id").only(
        "id", "type", "requested", "key", "value", "version_id", "reason", "actor", "method",
        "source"))
    statuses = dict(Version.objects.filter(pk__in=[o.version_id for o in ops if o.version_id])
                    .values_list("id", "status"))
    return {
        "id": evidence.id, "seq": evidence.seq, "status": evidence.state,
        "error": evidence.error, "source": evidence.source, "text": evidence.text,
        "facts": evidence.facts, "observed_at": evidence.observed_at,
        "received_at": evidence.received_at, "committed_at": evidence.committed_at,
        "operations": [
            {"op": o.type, "requested": o.requested, "key": o.key, "value": o.value,
             "version": o.version_id,
             "status": statuses.get(o.version_id) if o.version_id else None, "reason": o.reason,
             "actor": o.actor, "method": o.method, "source": o.source}
            for o in ops
        ],
        "cost": {"chat_calls": evidence.chat_calls, "embed_calls": evidence.embed_calls,
                 "prompt_tokens": evidence.prompt_tokens,
                 "completion_tokens": evidence.completion_tokens},
        **_yield_body(evidence, len(ops)),
    }


def _yield_body(evidence: Evidence, operations: int) -> dict[str, Any]:
    """``extraction``, plus what the observation yielded: ``facts_found`` and a ``note`` in
    words when it was committed with no fact (issue 17, item 5; additive fields)."""
    extraction = extraction_body(evidence.pk)
    found = None if extraction is None else extraction.pop("facts_found")
    note = selectors.observation_note(
        state=evidence.state, facts_found=found, operations=operations,
        extractor=extraction["extractor"] if extraction else None)
    return {"extraction": extraction, "facts_found": found, "note": note}


def extraction_body(evidence_id: int) -> dict[str, Any] | None:
    """How the observation's text became facts: the extractor, the model's raw answer, and
    the facts refused before anything was written (each with its reason). None before
    extraction. Only these parts are cut out of the extraction, in SQL: its facts and cached
    vectors never leave the database (decision 21)."""
    parts = (Evidence.objects.filter(pk=evidence_id)
             .values_list(KT("extracted__extractor"), KT("extracted__raw"),
                          KT("extracted__extraction_error"),
                          KeyTransform("dropped", "extracted"),
                          ExpressionWrapper(Q(extracted__isnull=True),
                                            output_field=BooleanField()),
                          Func(KeyTransform("facts", "extracted"),
                               function="jsonb_array_length", output_field=IntegerField()))
             .first())
    if parts is None or parts[4]:
        return None
    extractor, raw, error, dropped, _, found = parts
    return {"extractor": extractor, "raw": raw or "", "error": error,
            "dropped": list(dropped or []), "facts_found": found or 0}


def _enqueue(evidence_id: int) -> None:
    """Queue processing. The evidence is already committed: if the broker is down the
    observation is still stored (the answer is still 202), and the next sweep queues it."""
    queue_observation(evidence_id)


def _wait_settled(evidence_id: int, timeout: float = WAIT_SECONDS) -> Evidence:
    deadline = time.monotonic() + timeout
    delay = 0.02
    settled = Evidence.objects.filter(pk=evidence_id, state__in=SETTLED_STATES)
    # Polls the state alone; the row (text and facts, never the extraction or the
    # embedding) is read once, at the end.
    while not settled.exists() and time.monotonic() < deadline:
        time.sleep(delay)
        delay = min(delay * 1.5, 0.25)
    return Evidence.objects.defer("extracted", "embedding").get(pk=evidence_id)


class ObservationsView(NamespaceView):
    scopes = {"POST": WriteScope}

    @extend_schema(
        request=s.ObservationIn, responses={202: s.ObservationOut, 201: s.ObservationOut,
                                            400: s.ErrorOut, 403: s.ErrorOut, 409: s.ErrorOut},
        parameters=[OpenApiParameter("wait", int, description="1: block until committed or failed")],
        summary="Record an observation", operation_id="observation_create",
        description="Stored as evidence with its seq before the answer (202); committed by a "
                    "worker in seq order. With wait=1 the answer (201) comes once it is "
                    "committed or failed, with the operations it produced. A write token "
                    "names only its bound sources or sources without a trust level (403). "
                    "An idempotency_key used before replays that observation (replayed: "
                    "true) when the request is the same, else answers 409.",
    )
    def post(self, request: Request, ns: str) -> Response:
        namespace = self.reachable(request, ns)
        wait = request.query_params.get("wait", "0")
        if wait not in ("0", "1", "true", "false"):
            raise exceptions.ValidationError({"wait": "0 or 1"})
        data = s.ObservationIn(data=request.data)
        data.is_valid(raise_exception=True)
        if namespace is None:  # an application token's first write: valid, so it is made
            namespace = self.namespace(request, ns, create=True)
        v = data.validated_data
        facts = [{k: f[k] for k in ("key", "value", "op", "version", "hard_commit",
                                      "reason", "metadata") if k in f}
                 for f in v.get("facts", [])]
        # SPEC §8: the source is one this caller may claim (403 otherwise, nothing stored).
        source = source_claim(namespace=namespace, token=token_of(request),
                              scope=caller_scope(request, namespace), source=v.get("source"))
        recorded = observation_record(
            namespace=namespace, text=v.get("text", ""), facts=facts or None,
            source=source, observed_at=v.get("observed_at"),
            idempotency_key=v.get("idempotency_key"), actor=actor_of(request),
        )
        evidence = recorded.evidence
        if recorded.created:
            _enqueue(evidence.id)
        replayed = {"replayed": not recorded.created}
        headers = {"Idempotent-Replayed": "true"} if not recorded.created else None
        if wait in ("1", "true"):
            evidence = _wait_settled(evidence.id)
            if evidence.state in SETTLED_STATES:
                return Response({**observation_body(evidence), **replayed},
                                status=status.HTTP_201_CREATED, headers=headers)
        body = {"id": evidence.id, "seq": evidence.seq, "status": evidence.state, **replayed}
        return Response(body, status=status.HTTP_202_ACCEPTED, headers=headers)


class ObservationDetailView(NamespaceView):
    scopes = {"GET": ReadScope}

    @extend_schema(responses=s.ObservationOut, summary="An observation's status and operations",
                   operation_id="observation_get")
    def get(self, request: Request, ns: str, pk: int) -> Response:
        evidence = self.evidence(self.namespace(request, ns), pk)
        return Response(observation_body(evidence))


class ObservationRetryView(NamespaceView):
    scopes = {"POST": WriteScope}

    @extend_schema(request=None, responses={202: s.ObservationOut},
                   summary="Retry a failed observation",
                   operation_id="observation_retry")
    def post(self, request: Request, ns: str, pk: int) -> Response:
        evidence = self.evidence(self.namespace(request, ns), pk)
        if not observation_retry(evidence=evidence):
            return Response({"error": f"observation is {evidence.state}, not failed"}, status=409)
        _enqueue(evidence.id)
        evidence.refresh_from_db()
        return Response(observation_body(evidence), status=status.HTTP_202_ACCEPTED)


# --- cells ---------------------------------------------------------------------------------


def cell_body(namespace: Any, key: str, *, history: int = HISTORY_DEFAULT,
              as_of: datetime | None = None) -> dict[str, Any]:
    """The cell of CONTRACT, now or as of T, with at most ``history`` entries of its history
    (SPEC §10), ``history_total`` and ``history_next`` (the cursor of the next page). A key
    that had no version yet at T answers the empty cell; an erased key has no past (404)."""
    state = memory_history.cell_as_of(namespace, key, as_of, history=history)
    if state is None:
        raise exceptions.NotFound(f"no cell with key {key!r}")
    text = CellText(key=state.key, value=state.value, status=state.status,
                    support=state.support,
                    alternatives=tuple(a["value"] for a in state.alternatives))
    body: dict[str, Any] = {
        "key": state.key, "value": state.value, "status": state.status,
        "version": state.version, "support": state.support,
        "alternatives": [{k: a[k] for k in ("version", "value", "support")}
                         for a in state.alternatives],
        "history": [history_entry(e) for e in state.history],
        "history_total": state.history_total, "history_next": state.history_next,
        "aliases": list(KeyAlias.objects.filter(cell=state.cell).order_by("id")
                        .values_list("alias", flat=True)),
        "rendered": render_cell(text),
    }
    # When the key was first written and last changed (the store of LangGraph items says so).
    body["created_at"] = state.cell.created_at
    if as_of is None:
        body["updated_at"] = state.cell.updated_at
    else:
        body["as_of"] = as_of
    versions.attach_cells([body])
    return body


def history_entry(e: memory_history.Entry) -> dict[str, Any]:
    return {"version": e.version, "value": e.value, "status": e.status,
            "valid_from": e.valid_from, "valid_to": e.valid_to, "ordinal": e.ordinal}


def _cell(namespace: Any, key: str) -> Cell:
    """The cell a key names now (canonical, else an alias), else 404."""
    cell = selectors.cell_lookup(namespace=namespace, key=key)
    if cell is None:
        raise exceptions.NotFound(f"no cell with key {key!r}")
    return cell


class CellsView(NamespaceView):
    scopes = {"GET": ReadScope}

    @extend_schema(
        responses=s.CellListOut, summary="List cells (keyset-paginated by key)",
        operation_id="cells_list",
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
        metadata = _filter_param(request)
        status_ = request.query_params.get("status")
        if status_ not in (None, "", *CellStatus):
            *first, last = (status.value for status in CellStatus)
            raise exceptions.ValidationError({"status": f"{', '.join(first)} or {last}"})
        limit = _limit(request)
        as_of = parse_as_of(request.query_params.get("as_of"))
        history = bounded_int(request.query_params, "history", default=HISTORY_DEFAULT, low=0,
                              high=memory_history.HISTORY_MAX)
        if as_of is not None:
            return Response(_frontier_as_of(request, namespace, as_of, limit, status_ or None,
                                            metadata))
        qs = selectors.cells_list(namespace=namespace, status=status_ or None,
                                  search=request.query_params.get("search") or None)
        if metadata:
            qs = filtered.narrow_cells(qs, namespace=namespace, metadata=metadata)
        after = request.query_params.get("after")
        if after:
            qs = qs.filter(key__gt=after)
        rows = list(qs.order_by("key")[: limit + 1])
        more = len(rows) > limit
        rows = rows[:limit]
        results = selectors.cells_full(rows, history)
        versions.attach_cells(results)
        return Response({
            "results": results,
            "next": _next_url(request, after=rows[-1].key) if more else None,
        })


def _filter_param(request: Request) -> Metadata | None:
    """The ``filter`` query parameter: metadata as a JSON object (400 naming it otherwise)."""
    raw = request.query_params.get("filter")
    if raw is None or raw == "":
        return None
    try:
        return parse_filter(raw)
    except MetadataRefused as refused:
        raise exceptions.ValidationError({"filter": str(refused)}) from None


def _frontier_as_of(request: Request, namespace: Any, as_of: datetime, limit: int,
                    status_: str | None, metadata: Metadata | None = None) -> dict[str, Any]:
    """The frontier as of T (SPEC §9), one page by key: each cell's value and status then,
    and how many versions it held (its history as of T is one request away)."""
    rows, after = memory_history.frontier_as_of(
        namespace, as_of, after=request.query_params.get("after") or "", limit=limit,
        status=status_, search=request.query_params.get("search") or None, metadata=metadata)
    results = [{**r.as_dict(), "as_of": as_of} for r in rows]
    versions.attach(results)
    return {"results": results,
            "next": _next_url(request, after=after) if after else None, "as_of": as_of}


class CellDetailView(NamespaceView):
    scopes = {"GET": ReadScope, "DELETE": ReviewScope}

    @extend_schema(responses=s.CellOut, summary="A cell: current value, alternatives, history",
                   operation_id="cell_get",
                   parameters=[OpenApiParameter("history", int, description=(
                       "history entries in the answer (default 50, max 1000)")),
                       OpenApiParameter("as_of", str, description=(
                           "ISO-8601 time with a zone: the cell as memory was then"))])
    def get(self, request: Request, ns: str, key: str) -> Response:
        params = request.query_params
        history = bounded_int(params, "history", default=memory_history.HISTORY_DEFAULT,
                              low=0, high=memory_history.HISTORY_MAX)
        return Response(cell_body(self.namespace(request, ns), key, history=history,
                                  as_of=parse_as_of(params.get("as_of"))))

    @extend_schema(request=None, responses={204: None, 200: s.EraseReportOut},
                   parameters=[OpenApiParameter("report", int, description=(
                       "1: answer 200 with what was redacted and where else in the namespace "
                       "the erased values still appear"))],
                   summary="Privacy erase (SPEC §6): the key and its values are gone for good",
                   operation_id="cell_erase")
    def delete(self, request: Request, ns: str, key: str) -> Response:
        namespace = self.namespace(request, ns)
        report = request.query_params.get("report", "0")
        if report not in ("0", "1", "true", "false"):
            raise exceptions.ValidationError({"report": "0 or 1"})
        erased = cell_erase(namespace=namespace, key=key, actor=actor_of(request),
                            report=report in ("1", "true"))
        _enqueue_erase_followup()
        if report in ("1", "true"):
            return Response(erased.report())
        return Response(status=status.HTTP_204_NO_CONTENT)


def _enqueue_erase_followup() -> None:
    from memory.tasks import enqueue_erase_followup

    enqueue_erase_followup()


class CellGraphView(NamespaceView):
    scopes = {"GET": ReadScope}

    @extend_schema(
        responses=s.GraphOut, operation_id="cell_graph",
        summary="A window of the cell's provenance graph (around a version, as of a time)",
        parameters=[OpenApiParameter("around", int, description="a version id (default the head)"),
                    OpenApiParameter("limit", int, description="versions (default 40, max 500)"),
                    OpenApiParameter("as_of", str, description="ISO-8601 time with a zone")])
    def get(self, request: Request, ns: str, key: str) -> Response:
        params = request.query_params
        around = version_id(params, "around")
        limit = bounded_int(params, "limit", default=memory_history.WINDOW_DEFAULT, low=1,
                            high=memory_history.WINDOW_MAX)
        as_of = parse_as_of(params.get("as_of"))
        cell = _cell(self.namespace(request, ns), key)
        graph = memory_history.graph_window(cell, around=around, limit=limit, as_of=as_of)
        if as_of is None:
            graph.pop("as_of")
        for node in graph["nodes"]:  # an evidence node carries the head of its text
            if node["kind"] == "evidence":
                node["observation_url"] = request.build_absolute_uri(
                    reverse("api-observation", args=[ns, node["observation"]]))
        versions.attach_graph(graph)
        return Response(graph)


class CellHistoryView(NamespaceView):
    scopes = {"GET": ReadScope}

    @extend_schema(
        responses=s.HistoryPageOut, operation_id="cell_history",
        summary="A page of the cell's history, newest first (keyset cursor, value search)",
        parameters=[OpenApiParameter("before", str, description="the cursor `next` gave"),
                    OpenApiParameter("limit", int, description="default 50, max 1000"),
                    OpenApiParameter("as_of", str, description="ISO-8601 time with a zone"),
                    OpenApiParameter("search", str, description="words the value holds")])
    def get(self, request: Request, ns: str, key: str) -> Response:
        params = request.query_params
        limit = bounded_int(params, "limit", default=memory_history.HISTORY_DEFAULT, low=1,
                            high=memory_history.HISTORY_MAX)
        as_of = parse_as_of(params.get("as_of"))
        search = params.get("search") or None
        if search is not None and len(search) > 200:
            raise exceptions.ValidationError({"search": "at most 200 characters"})
        cell = _cell(self.namespace(request, ns), key)
        entries, nxt, total = memory_history.history_page(
            cell, before=params.get("before") or None, limit=limit, as_of=as_of, search=search)
        results = [history_entry(e) for e in entries]
        versions.attach(results)
        body: dict[str, Any] = {
            "results": results, "next": nxt, "total": total,
            "next_url": _next_url(request, before=nxt) if nxt else None}
        if search is not None and total >= memory_history.SEARCH_COUNT_CAP:
            body["total_capped"] = True
        if as_of is not None:
            body["as_of"] = as_of
        return Response(body)


class CellTimelineView(NamespaceView):
    scopes = {"GET": ReadScope}

    @extend_schema(
        responses=s.TimelineOut, operation_id="cell_timeline",
        summary="The whole history in a few buckets of time, counted by status",
        parameters=[OpenApiParameter("buckets", int, description="default 60, max 500"),
                    OpenApiParameter("as_of", str, description="ISO-8601 time with a zone")])
    def get(self, request: Request, ns: str, key: str) -> Response:
        params = request.query_params
        buckets = bounded_int(params, "buckets", default=60, low=1, high=500)
        as_of = parse_as_of(params.get("as_of"))
        cell = _cell(self.namespace(request, ns), key)
        return Response(memory_history.status_timeline(cell, buckets=buckets, as_of=as_of))


class CellOperationsView(NamespaceView):
    scopes = {"POST": ReviewScope}

    @extend_schema(request=s.CellOpIn, responses={201: s.CellOpOut},
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
        applied = operation_apply(
            namespace=namespace, key=key, op=v["op"], value=v.get("value"),
            version_id=v.get("version"), actor=actor_of(request), reason=v.get("reason", ""),
            explicit=True,
        )
        cell = cell_body(namespace, applied.cell.key) if applied.cell else None
        row = operation_row(applied.operation)
        versions.attach(references=[row])
        return Response({"operation": row, "cell": cell}, status=status.HTTP_201_CREATED)


# --- the operation log and reads -------------------------------------------------------------


def operation_row(o: Operation) -> dict[str, Any]:
    return {"id": o.id, "op": o.type, "requested": o.requested, "key": o.key, "value": o.value,
            "version": o.version_id, "actor": o.actor, "method": o.method, "source": o.source,
            "reason": o.reason, "seq": o.seq,
            "observation": o.evidence_id, "created_at": o.created_at,
            "raw_output": o.raw_output, "payload": o.payload}


class OperationsView(NamespaceView):
    scopes = {"GET": ReadScope}

    @extend_schema(
        responses=s.OperationListOut, summary="The operation log, newest first",
        operation_id="operations_list",
        parameters=[OpenApiParameter("key", str, description="exactly this key"),
                    OpenApiParameter("key_contains", str,
                                     description="a part of the key (normalised like a key)"),
                    OpenApiParameter("op", str, enum=list(LOG_TYPES)),
                    OpenApiParameter("actor", str, description="api:<token>, user:<name>, …"),
                    OpenApiParameter("source", str, description="the evidence's source"),
                    OpenApiParameter("before", int), OpenApiParameter("limit", int)],
    )
    def get(self, request: Request, ns: str) -> Response:
        namespace = self.namespace(request, ns)
        limit = _limit(request)
        params = request.query_params
        op = params.get("op") or None
        if op is not None and op not in LOG_TYPES:
            raise exceptions.ValidationError({"op": f"one of {', '.join(LOG_TYPES)}"})
        qs = selectors.operations_list(namespace=namespace, key=params.get("key"),
                                       actor=params.get("actor"),
                                       key_contains=params.get("key_contains"), op=op,
                                       source=params.get("source"))
        raw_before = request.query_params.get("before")
        if raw_before is not None:
            before = _digits(raw_before)
            if before is None or before > s.BIGINT_MAX:
                raise exceptions.ValidationError({"before": "an operation id"})
            qs = qs.filter(Q(id__lt=before))
        rows = list(qs[: limit + 1])
        more = len(rows) > limit
        rows = rows[:limit]
        results = [operation_row(o) for o in rows]
        versions.attach(references=results)
        return Response({"results": results,
                         "next": _next_url(request, before=rows[-1].id) if more else None})


def read_for(namespace: Any, v: dict[str, Any]) -> selectors.ReadResult:
    as_of = parse_as_of(v.get("as_of"))
    if v.get("filter"):
        result = filtered_read(namespace, v, as_of)
    else:
        result = reads.read(v["mode"], namespace=namespace, query=v["query"], k=v.get("k"),
                            disclose=v["disclose"], gate=v["gate"], as_of=as_of)
    if v.get("min_score") is not None:
        result = filtered.with_min_score(result, v["min_score"])
    return result


def filtered_read(namespace: Any, v: dict[str, Any],
                  as_of: datetime | None) -> selectors.ReadResult:
    """The frontier read among the facts whose current version carries the ``filter``."""
    k = v.get("k") or reads.READ_MODES["frontier"].default_k
    if as_of is not None:
        return filtered.frontier_read_as_of_filtered(
            namespace=namespace, query=v["query"], as_of=as_of, metadata=v["filter"], k=k,
            disclose=v["disclose"])
    return filtered.frontier_read_filtered(namespace=namespace, query=v["query"],
                                           metadata=v["filter"], k=k, disclose=v["disclose"])


class ReadView(NamespaceView):
    scopes = {"POST": ReadScope}

    @extend_schema(request=s.ReadIn, responses=s.ReadOut,
                   summary=f"Read memory for a query: {', '.join(reads.READ_MODES)}",
                   operation_id="read")
    def post(self, request: Request, ns: str) -> Response:
        namespace = self.namespace(request, ns)
        data = s.ReadIn(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        body = read_for(namespace, v).as_dict()
        if body["mode"] == "frontier":  # items name the cells' current versions
            versions.attach(body["items"])
        return Response(body)


class AnswerView(NamespaceView):
    scopes = {"POST": ReadScope}

    @extend_schema(request=s.AnswerIn, responses=s.AnswerOut, operation_id="answer",
                   summary="A model answers the query from a read's context (needs a model)")
    def post(self, request: Request, ns: str) -> Response:
        namespace = self.namespace(request, ns)
        data = s.AnswerIn(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        client = client_from_settings()
        if client is None:
            return Response({"error": "the answer step needs a model: set PMEM_LLM_BASE_URL"},
                            status=status.HTTP_409_CONFLICT)
        result = reads.model_answer(v["mode"], client=client, namespace=namespace,
                                    query=v["query"], k=v.get("k"), disclose=v["disclose"],
                                    gate=v["gate"])
        return Response({"answer": result.answer, "mode": v["mode"], "context": result.context,
                         "context_chars": result.context_chars, "lookups": result.lookups,
                         "error": result.error,
                         "cost": {"chat_calls": result.chat_calls,
                                  "prompt_tokens": result.prompt_tokens,
                                  "completion_tokens": result.completion_tokens}})
