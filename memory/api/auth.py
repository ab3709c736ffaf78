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

from memory.models import ApiToken, Membership, Namespace


@dataclass(frozen=True)
class TokenClient:
    """The ``request.user`` of a token-authenticated request."""

    token: ApiToken
    is_authenticated: bool = True
    is_anonymous: bool = False
    is_superuser: bool = False


class NamespaceTokenAuthentication(authentication.TokenAuthentication):
    keyword = "Token"

    def authenticate_credentials(self, key: str) -> tuple[TokenClient, ApiToken]:
        token = ApiToken.objects.select_related("namespace").filter(key=key).first()
        if token is None:
            raise exceptions.AuthenticationFailed("invalid token")
        return TokenClient(token), token


#: The channels a token's request may declare in ``X-Pmem-Channel``: the prefix of the actor
#: signed on what it writes (``mcp:<client>`` for the MCP server, docs/decisions.md "The MCP
#: server signs its writes mcp:<client>"). A label, not a privilege: the namespace, the client
#: name and what the token may do stay the token's.
CHANNELS = ("api", "mcp")


def channel_of(request: Request) -> str:
    channel = request.META.get("HTTP_X_PMEM_CHANNEL") or "api"
    if channel not in CHANNELS:
        raise exceptions.ValidationError({"X-Pmem-Channel": f"one of {', '.join(CHANNELS)}"})
    return channel


def actor_of(request: Request) -> str:
    user = request.user
    if isinstance(user, TokenClient):
        return f"{channel_of(request)}:{user.token.client}"
    return f"user:{user.get_username()}"


def token_scope(token: ApiToken) -> str:
    """The scope ``whoami`` reports. Every token reaches all of its namespace today, so
    ``review``; the token scopes of CONTRACT "Tokens and roles" replace this function."""
    return "review"


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
    if write and role != Membership.Role.REVIEWER:
        raise exceptions.PermissionDenied("viewers may not change memory; ask for the reviewer role")
    return namespace
