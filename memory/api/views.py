"""The HTTP API of CONTRACT.md, besides the cells (:mod:`memory.api.cell_views`): the token,
observations, the operation log, reads and answers. One APIView per operation, thin: parse, call
a service or a selector, render with the answer's output serializer
(:mod:`memory.api.outputs`). Errors are raised and mapped in :mod:`memory.api.errors`."""

from __future__ import annotations

import logging
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, status
from rest_framework.request import Request
from rest_framework.response import Response

from memory import reads
from memory.domain import LOG_TYPES, SETTLED_STATES
from memory.domain.instants import parse_instant
from memory.llm.client import client_from_settings
from memory.selectors.log import operations_page
from memory.selectors.observations import observation_detail, observation_when_settled
from memory.selectors.search import ReadResult
from memory.services import (
    observation_commit_at_once,
    observation_record,
    observation_retry,
)
from memory.tasks import queue_drain, queue_observation

from . import graph_outputs as g
from . import outputs as o
from . import serializers as s
from .auth import TokenClient
from .base import NamespaceView, ScopedView
from .observing import observation_asked
from .params import next_url, operation_before, page_limit, zero_or_one
from .permissions import ReadScope, WriteScope

log = logging.getLogger("pmem.api")
#: The refusals every namespace's endpoint may answer (ErrorOut): bad input, a token that may
#: not, a namespace (or what the URL names in it) that is not there.
REFUSALS: dict[int, Any] = {400: o.ErrorOut, 403: o.ErrorOut, 404: o.ErrorOut}


class WhoAmIView(ScopedView):
    scopes = {"GET": ReadScope}

    @extend_schema(responses={200: o.WhoAmIOut, 400: o.ErrorOut}, operation_id="whoami",
                   summary="The namespace, scope and client of the token that asks")
    def get(self, request: Request) -> Response:
        user = request.user
        if not isinstance(user, TokenClient):
            return Response({"error": "whoami describes an API token; send one",
                             "field": "Authorization"}, status=status.HTTP_400_BAD_REQUEST)
        return Response(o.WhoAmIOut.render(user.token))


# --- observations ----------------------------------------------------------------------------


def _enqueue(evidence_id: int) -> None:
    """Queue processing. The evidence is already committed: if the broker is down the
    observation is still stored (the answer is still 202), and the next sweep queues it."""
    queue_observation(evidence_id)


def _observation(detail: dict[str, Any]) -> dict[str, Any]:
    """An observation's answer (its operations' versions named with their ordinals: the
    selector reads them with the operations)."""
    return o.ObservationOut.render(detail)


class ObservationsView(NamespaceView):
    scopes = {"POST": WriteScope}

    @extend_schema(
        request=s.ObservationIn,
        responses={**REFUSALS, 202: o.ObservationAcceptedOut, 201: o.ObservationOut,
                   409: o.ErrorOut},
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
        wait = zero_or_one(request.query_params, "wait")
        data = s.ObservationIn(data=request.data)
        data.is_valid(raise_exception=True)
        if namespace is None:  # an application token's first write: valid, so it is made
            namespace = self.namespace(request, ns, create=True)
        said = observation_asked(data.validated_data, request=request, namespace=namespace)
        # A caller that waits for the commit is answered by it: without a model, and with
        # nothing ahead of it, the observation is recorded and committed here in one
        # transaction (nothing is answered before it commits; when it cannot be, nothing
        # was kept, and it is recorded and queued as below).
        committed = observation_commit_at_once(**said, hand_on=queue_drain) if wait else None
        if committed is not None:
            return Response(_observation({**observation_detail(committed), "replayed": False}),
                            status=status.HTTP_201_CREATED)
        recorded = observation_record(**said)
        evidence = recorded.evidence
        if recorded.created:
            _enqueue(evidence.id)
        replayed = not recorded.created
        headers = {"Idempotent-Replayed": "true"} if replayed else None
        if wait:
            evidence = observation_when_settled(evidence.id)
            if evidence.state in SETTLED_STATES:
                return Response(_observation({**observation_detail(evidence),
                                              "replayed": replayed}),
                                status=status.HTTP_201_CREATED, headers=headers)
        return Response(o.ObservationAcceptedOut.render(
            {"id": evidence.id, "seq": evidence.seq, "status": evidence.state,
             "replayed": replayed}), status=status.HTTP_202_ACCEPTED, headers=headers)


class ObservationDetailView(NamespaceView):
    scopes = {"GET": ReadScope}

    @extend_schema(responses={**REFUSALS, 200: o.ObservationOut},
                   summary="An observation's status and operations",
                   operation_id="observation_get")
    def get(self, request: Request, ns: str, pk: int) -> Response:
        evidence = self.evidence(self.namespace(request, ns), pk)
        return Response(_observation(observation_detail(evidence)))


class ObservationRetryView(NamespaceView):
    scopes = {"POST": WriteScope}

    @extend_schema(request=None, responses={**REFUSALS, 202: o.ObservationOut, 409: o.ErrorOut},
                   summary="Retry a failed observation",
                   operation_id="observation_retry")
    def post(self, request: Request, ns: str, pk: int) -> Response:
        evidence = self.evidence(self.namespace(request, ns), pk)
        if not observation_retry(evidence=evidence):
            return Response({"error": f"observation is {evidence.state}, not failed"}, status=409)
        _enqueue(evidence.id)
        evidence.refresh_from_db()
        return Response(_observation(observation_detail(evidence)),
                        status=status.HTTP_202_ACCEPTED)


# --- the operation log -------------------------------------------------------------------------


class OperationsView(NamespaceView):
    scopes = {"GET": ReadScope}

    @extend_schema(
        responses={**REFUSALS, 200: g.OperationListOut},
        summary="The operation log, newest first", operation_id="operations_list",
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
        limit = page_limit(request)
        params = request.query_params
        op = params.get("op") or None
        if op is not None and op not in LOG_TYPES:
            raise exceptions.ValidationError({"op": f"one of {', '.join(LOG_TYPES)}"})
        rows, more = operations_page(
            namespace=namespace, key=params.get("key"), actor=params.get("actor"),
            key_contains=params.get("key_contains"), op=op, source=params.get("source"),
            before=operation_before(params), limit=limit)
        return Response(g.OperationListOut.render({
            "results": rows, "next": next_url(request, before=rows[-1].id) if more else None}))


# --- reads -------------------------------------------------------------------------------------


class ReadView(NamespaceView):
    scopes = {"POST": ReadScope}

    @extend_schema(request=s.ReadIn, responses={**REFUSALS, 200: o.ReadOut},
                   summary=f"Read memory for a query: {', '.join(reads.READ_MODES)}",
                   operation_id="read")
    def post(self, request: Request, ns: str) -> Response:
        namespace = self.namespace(request, ns)
        data = s.ReadIn(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(o.ReadOut.render(read_for(namespace, data.validated_data)))


def read_for(namespace: Any, v: dict[str, Any]) -> ReadResult:
    """A read as asked: in its mode, narrowed by a metadata ``filter`` (frontier modes), cut
    at ``min_score``."""
    return reads.read(v["mode"], namespace=namespace, query=v["query"], k=v.get("k"),
                      disclose=v["disclose"], gate=v["gate"],
                      as_of=parse_instant(v.get("as_of"), field="as_of"),
                      metadata=v.get("filter"), min_score=v.get("min_score"))


class AnswerView(NamespaceView):
    scopes = {"POST": ReadScope}

    @extend_schema(request=s.AnswerIn, responses={**REFUSALS, 200: o.AnswerOut, 409: o.ErrorOut},
                   operation_id="answer",
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
        return Response(o.AnswerOut.render(result))
