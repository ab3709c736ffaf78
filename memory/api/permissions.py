"""Scopes on the HTTP API: one DRF permission class per scope, declared by every endpoint.

Each view names the class its every method needs (``NamespaceView.scopes``); a method with a
handler and no declaration is refused (fail closed), and tests/api/test_scopes.py walks the URL
conf so that a new endpoint without a declared scope fails the suite. The scope arithmetic is
``memory.domain.scopes``, shared with the MCP server.
"""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from memory.domain.scopes import Scope, scope_allows

from .auth import TokenClient


class ScopePermission(BasePermission):
    """Lets a token through when its scope covers ``scope``. Session users pass here: their
    role in the namespace is checked with the same scope once the namespace is known
    (``memory.api.auth.namespace_for``), so that a non-member gets 404, not 403."""

    scope: Scope = Scope.REVIEW

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        if user is None or not getattr(user, "is_authenticated", False):
            raise exceptions.NotAuthenticated()
        if isinstance(user, TokenClient) and not scope_allows(user.scope, self.scope):
            raise exceptions.PermissionDenied(
                f"this token's scope is {user.scope.value}; this needs scope {self.scope.value}")
        return True


class ReadScope(ScopePermission):
    scope = Scope.READ


class WriteScope(ScopePermission):
    scope = Scope.WRITE


class ReviewScope(ScopePermission):
    scope = Scope.REVIEW


class UndeclaredScope(BasePermission):
    """A handler whose view declares no scope for its method: nobody passes."""

    def has_permission(self, request: Request, view: Any) -> bool:
        raise exceptions.PermissionDenied("this endpoint declares no scope")
