"""What every API view shares: the scope each method needs (stated in the schema), the rate
limit, the refusal of oversize bodies and NUL characters, and the namespace, observation and
cell a URL names."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.views import APIView

from memory.domain.scopes import Scope
from memory.selectors.cells import cell_lookup
from memory.selectors.observations import observation_in

from .auth import namespace_for
from .errors import PayloadTooLarge
from .params import digits
from .permissions import ReadScope, ReviewScope, ScopePermission, UndeclaredScope
from .schema import ScopedAutoSchema
from .throttles import TokenRateThrottle


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


class NamespaceView(ScopedView):
    """Base: refuses oversize bodies before parsing; resolves the namespace per request."""

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        length = digits(request.META.get("CONTENT_LENGTH") or "0")
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

    def evidence(self, namespace: Any, pk: int) -> Any:
        evidence = observation_in(namespace=namespace, pk=pk)
        if evidence is None:
            raise exceptions.NotFound("no such observation")
        return evidence

    def cell(self, namespace: Any, key: str) -> Any:
        """The cell a key names now (canonical, else an alias), else 404."""
        cell = cell_lookup(namespace=namespace, key=key)
        if cell is None:
            raise exceptions.NotFound(f"no cell with key {key!r}")
        return cell
