"""The namespaces themselves (SPEC §13, CONTRACT "Namespace lifecycle and expiry"): the list a
token reaches, and the deletion of one with everything in it."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, status
from rest_framework.request import Request
from rest_framework.response import Response

from memory.domain import may_manage
from memory.selectors.access import member_role
from memory.selectors.namespaces import namespaces_page, reachable_namespaces
from memory.services import namespace_delete
from memory.tasks import enqueue_namespace_followup

from . import outputs as o
from .auth import TokenClient, actor_of, token_of
from .base import NamespaceView, ScopedView
from .params import next_url, page_limit, zero_or_one
from .permissions import ReadScope, ReviewScope


class NamespacesView(ScopedView):
    scopes = {"GET": ReadScope}

    @extend_schema(
        responses={200: o.NamespaceListOut, 400: o.ErrorOut},
        summary="The namespaces this token reaches (keyset-paginated by name)",
        operation_id="namespaces_list",
        description="An application token: every namespace under its prefix; a namespace's "
                    "token: its own; a person: those they are a member of.",
        parameters=[OpenApiParameter("after", str), OpenApiParameter("limit", int)],
    )
    def get(self, request: Request) -> Response:
        limit = page_limit(request)
        user = request.user
        qs = reachable_namespaces(token=token_of(request),
                                  user=None if isinstance(user, TokenClient) else user)
        rows, after = namespaces_page(qs, after=request.query_params.get("after") or None,
                                      limit=limit)
        return Response(o.NamespaceListOut.render(
            {"results": rows, "next": next_url(request, after=after) if after else None}))


class NamespaceDetailView(NamespaceView):
    scopes = {"DELETE": ReviewScope}

    @extend_schema(
        responses={204: None, 200: o.NamespaceDeletedOut, 400: o.ErrorOut, 403: o.ErrorOut,
                   404: o.ErrorOut},
        summary="Delete the namespace and everything in it (SPEC §13)",
        operation_id="namespace_delete",
        description="Every key erased (SPEC §6), every observation, token, member and trust "
                    "level deleted, then the namespace: it answers 404 afterwards and its "
                    "name starts empty. An audit record (who, when, a digest of the name, "
                    "counts) remains. With report=1: 200 with the counts.",
        parameters=[OpenApiParameter("report", int, description="1: answer the counts")],
    )
    def delete(self, request: Request, ns: str) -> Response:
        report = zero_or_one(request.query_params, "report")
        namespace = self.namespace(request, ns)
        user = request.user
        if not isinstance(user, TokenClient) and not getattr(user, "is_superuser", False):
            if not may_manage(member_role(namespace=namespace, user_id=user.pk or 0) or ""):
                raise exceptions.PermissionDenied("only a namespace's admins may delete it")
        deleted = namespace_delete(namespace=namespace, actor=actor_of(request))
        enqueue_namespace_followup()
        if report:
            return Response(o.NamespaceDeletedOut.render(deleted.report()))
        return Response(status=status.HTTP_204_NO_CONTENT)
