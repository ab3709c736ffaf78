"""API authentication and namespace scoping.

``Authorization: Token <key>`` authenticates as the token's client and reaches the token's
namespace only; session auth (the explorer) reaches namespaces the user is a member of. A
namespace the caller cannot reach answers 404, so its existence does not leak.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from memory.domain import may_act
from memory.models import ApiToken, Membership, Namespace


@dataclass(frozen=True)
class TokenClient:
    """The ``request.user`` of a token-authenticated request."""

    token: ApiToken
    is_authenticated: bool = True
    is_anonymous: bool = False
    is_superuser: bool = False

    @property
    def actor(self) -> str:
        return f"api:{self.token.client}"


class NamespaceTokenAuthentication(authentication.TokenAuthentication):
    keyword = "Token"

    def authenticate_credentials(self, key: str) -> tuple[TokenClient, ApiToken]:
        token = ApiToken.objects.select_related("namespace").filter(key=key).first()
        if token is None:
            raise exceptions.AuthenticationFailed("invalid token")
        return TokenClient(token), token


def actor_of(request: Request) -> str:
    user = request.user
    if isinstance(user, TokenClient):
        return user.actor
    return f"user:{user.get_username()}"


def namespace_for(request: Request, name: str, *, write: bool = False) -> Namespace:
    """The namespace ``name`` if the caller may reach it (and, for writes, act in it)."""
    user = request.user
    if isinstance(user, TokenClient):
        if user.token.namespace.name != name:
            raise exceptions.NotFound("no such namespace")
        return user.token.namespace
    namespace = Namespace.objects.filter(name=name).first()
    if namespace is None or isinstance(user, AnonymousUser) or user is None:
        raise exceptions.NotFound("no such namespace")
    assert isinstance(user, AbstractBaseUser)
    if getattr(user, "is_superuser", False):
        return namespace
    role = Membership.objects.filter(namespace=namespace, user=user).values_list(
        "role", flat=True).first()
    if role is None:
        raise exceptions.NotFound("no such namespace")
    if write and not may_act(role):
        raise exceptions.PermissionDenied("viewers may not change memory; ask for the reviewer role")
    return namespace
