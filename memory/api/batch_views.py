"""``POST observations/batch/``: many observations in one request, checked whole first and
recorded in one transaction (:mod:`memory.services.observation_batch`)."""

from __future__ import annotations

import time
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from memory.domain import SETTLED_STATES
from memory.llm.extraction import runs_locally
from memory.selectors.observations import WAIT_SECONDS, observation_when_settled
from memory.services import SourceRefused, namespace_drain, observations_record_batch
from memory.tasks import queue_drain, queue_observation

from . import outputs as o
from . import serializers as s
from .auth import actor_of
from .base import NamespaceView
from .observing import observation_asked
from .params import zero_or_one
from .permissions import WriteScope


class ObservationBatchView(NamespaceView):
    scopes = {"POST": WriteScope}

    @extend_schema(
        request=s.ObservationBatchIn,
        responses={400: o.ErrorOut, 403: o.ErrorOut, 404: o.ErrorOut, 409: o.ErrorOut,
                   202: o.ObservationBatchOut, 201: o.ObservationBatchOut},
        parameters=[OpenApiParameter("wait", int,
                                     description="1: answer once every item is committed")],
        summary="Record many observations at once, in order", operation_id="observation_batch",
        description="Each item as the single endpoint takes it (at most 1,000). The whole "
                    "batch is checked first: one bad item is a 400 naming its path "
                    "(observations[57].facts[0].key) and nothing is stored. Then every item "
                    "is stored in the given order, in one transaction, with consecutive seqs. "
                    "An item whose idempotency_key was used with the same request replays it "
                    "(replayed: true, nothing new stored); with another request the batch is "
                    "a 409 and nothing is stored. With wait=1 the answer (201) comes once "
                    "every item is committed or failed.")
    def post(self, request: Request, ns: str) -> Response:
        namespace = self.reachable(request, ns)
        wait = zero_or_one(request.query_params, "wait")
        data = s.ObservationBatchIn(data=request.data)
        data.is_valid(raise_exception=True)
        if namespace is None:  # an application token's first write: valid, so it is made
            namespace = self.namespace(request, ns, create=True)
        items: list[dict[str, Any]] = []
        for index, v in enumerate(data.validated_data["observations"]):
            try:
                asked = observation_asked(v, request=request, namespace=namespace)
            except SourceRefused as refused:  # nothing stored: the batch is refused whole
                return Response({"error": str(refused),
                                 "field": f"observations[{index}].source"},
                                status=status.HTTP_403_FORBIDDEN)
            items.append({k: asked[k] for k in asked if k not in ("namespace", "actor")})
        recorded = observations_record_batch(namespace=namespace, items=items,
                                             actor=actor_of(request))
        new = recorded.new_ids
        local = runs_locally()
        if new and local and wait:
            namespace_drain(namespace_id=namespace.pk)  # CPU only: commit them here
        elif new and local:
            queue_drain(namespace.pk)  # one drain commits them all, in seq order
        else:
            for evidence_id in new:  # with a model: extracted in parallel, committed in order
                queue_observation(evidence_id)
        rows = recorded.evidence
        if wait:
            deadline = time.monotonic() + WAIT_SECONDS
            rows = [e if e.state in SETTLED_STATES else observation_when_settled(
                e.pk, max(0.0, deadline - time.monotonic())) for e in rows]
        settled = wait and all(e.state in SETTLED_STATES for e in rows)
        body = {"results": [{"id": e.pk, "seq": e.seq, "status": e.state, "replayed": not made}
                            for e, made in zip(rows, recorded.created, strict=True)]}
        return Response(o.ObservationBatchOut.render(body),
                        status=status.HTTP_201_CREATED if settled else status.HTTP_202_ACCEPTED)
