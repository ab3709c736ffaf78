"""The OpenAPI schema states the scope each operation needs (``x-pmem-scope`` and a line of
its description) and describes the token header."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema


def declared_scope(view: Any, method: str) -> str | None:
    """The scope ``view`` declares for ``method`` (its permission class's), if any."""
    permission = getattr(view, "scopes", {}).get(method.upper())
    scope = getattr(permission, "scope", None)
    return getattr(scope, "value", None)


class ScopedAutoSchema(AutoSchema):
    def get_operation(self, path: str, path_regex: str, path_prefix: str, method: str,
                      registry: Any) -> dict[str, Any] | None:
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        scope = declared_scope(self.view, method)
        if operation is not None and scope is not None:
            operation["x-pmem-scope"] = scope
            note = f"Token scope: `{scope}` (or a member role that covers it)."
            operation["description"] = f"{operation.get('description', '')}\n\n{note}".strip()
        return operation


class NamespaceTokenScheme(OpenApiAuthenticationExtension):
    target_class = "memory.api.auth.NamespaceTokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {"type": "apiKey", "in": "header", "name": "Authorization",
                "description": "`Token <token>` (or `Bearer <token>`). A token reaches one "
                               "namespace, within its scope: read, write or review."}
