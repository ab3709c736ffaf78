"""API authentication and namespace scoping.

``Authorization: Token <token>`` (or ``Bearer <token>``, as the MCP server takes it)
authenticates as the token's client and reaches the token's namespace only — an application
token the namespaces whose names start with its prefix, creating one on its first write —
within the token's scope; session auth (the explorer) reaches namespaces the user is a member of, with the scope
of the member's role. A namespace the caller cannot reach answers 404, so its existence does
not leak; a token that is not usable answers 401 whatever namespace it was sent to.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from memory.domain.scopes import Scope, scope_allows
from memory.llm.embedding import embedder_id
from memory.models import ApiToken, Membership, Namespace
from memory.selectors.fresh import expiry_checked
from memory.services import (
    TokenRejected,
    name_check,
    namespace_create,
    namespace_reached,
    token_authenticate,
)

KEYWORDS = (b"token", b"bearer")
#: What each explorer role may do through the API with a session.
ROLE_SCOPES = {Membership.Role.VIEWER: Scope.READ, Membership.Role.REVIEWER: Scope.REVIEW,
               Membership.Role.ADMIN: Scope.REVIEW}


@dataclass(frozen=True)
class TokenClient:
    """The ``request.user`` of a token-authenticated request."""

    token: ApiToken
    is_authenticated: bool = True
    is_anonymous: bool = False
    is_superuser: bool = False

    @property
    def scope(self) -> Scope:
        return Scope(self.token.scope)


class NamespaceTokenAuthentication(authentication.BaseAuthentication):
    """Parses the header itself so that every malformed form gets a plain 401: no scheme
    but ours is tried, nothing undecodable reaches a query."""

    keyword = "Token"

    def authenticate(self, request: Request) -> tuple[TokenClient, ApiToken] | None:
        try:
            header = authentication.get_authorization_header(request)
        except UnicodeEncodeError:  # a str header beyond Latin-1 (only test clients send one)
            raise exceptions.AuthenticationFailed("malformed Authorization header") from None
        if not header:
            return None
        scheme, _, credentials = header.partition(b" ")
        if scheme.lower() not in KEYWORDS:
            return None  # another scheme: not ours to judge (401 if nothing else accepts it)
        credentials = credentials.strip(b" ")
        if not credentials or b" " in credentials:
            raise exceptions.AuthenticationFailed("malformed Authorization header: "
                                                  "expected 'Token <token>'")
        try:
            raw = credentials.decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("invalid token") from None
        try:
            token = token_authenticate(raw=raw)
        except TokenRejected as exc:
            raise exceptions.AuthenticationFailed(str(exc)) from None
        return TokenClient(token), token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword  # makes DRF answer 401 (with WWW-Authenticate), not 403


#: The channels a token's request may declare in ``X-Pmem-Channel``: the prefix of the actor
#: signed on what it writes (``mcp:<client>`` for the MCP server: the log says which door a write came
#: through). A label, not a privilege: the namespace, the client
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


def unwritten_namespace(name: str) -> Namespace:
    """A namespace an application token may create, not created yet: what its reads see is
    an empty namespace's (no row has namespace id 0). Never saved; only read scopes get it."""
    return Namespace(pk=0, name=name, embedder=embedder_id())


def namespace_for(request: Request, name: str, *, scope: Scope = Scope.READ,
                  create: bool = False, missing_ok: bool = False) -> Namespace | None:
    """The namespace ``name`` if the caller may reach it with ``scope``.

    A token's scope was checked before the view ran (``memory.api.permissions``); a person's
    comes from their role here, after membership, so a non-member sees 404, never 403. An
    application token reaches the names that start with its prefix; with ``create`` (its
    writes) a name it reaches that has no namespace yet gets one, else it is 404 like any
    other namespace the caller cannot see — or None with ``missing_ok``."""
    name_check(name)  # InvalidName: 400 stating the rule, whoever asks
    user = request.user
    if isinstance(user, TokenClient):
        token = user.token
        if not namespace_reached(token, name):
            raise exceptions.NotFound("no such namespace")
        if token.namespace is not None:
            return expiry_checked(token.namespace)
        found = Namespace.objects.filter(name=name).first()
        if found is None and create:
            found = namespace_create(name=name)
        if found is None and scope == Scope.READ and not missing_ok:
            return unwritten_namespace(name)  # reads as empty until its first write
        if found is None and not missing_ok:
            raise exceptions.NotFound("no such namespace")
        return expiry_checked(found)
    namespace = Namespace.objects.filter(name=name).first()
    if namespace is None or isinstance(user, AnonymousUser) or user is None:
        raise exceptions.NotFound("no such namespace")
    assert isinstance(user, AbstractBaseUser)
    if getattr(user, "is_superuser", False):
        return expiry_checked(namespace)
    role = Membership.objects.filter(namespace=namespace, user=user).values_list(
        "role", flat=True).first()
    if role is None:
        raise exceptions.NotFound("no such namespace")
    held = ROLE_SCOPES.get(Membership.Role(role), Scope.READ)
    if not scope_allows(held, scope):
        raise exceptions.PermissionDenied(
            f"a {role} may not do this (it needs scope {scope.value}); ask for the reviewer role")
    return expiry_checked(namespace)


def token_of(request: Request) -> ApiToken | None:
    """The token the request authenticated with, None for a person's session."""
    user = request.user
    return user.token if isinstance(user, TokenClient) else None


def caller_scope(request: Request, namespace: Namespace) -> Scope:
    """What the caller may do in ``namespace`` (already reached through
    :func:`namespace_for`): the token's scope, or the scope of the person's role."""
    user = request.user
    if isinstance(user, TokenClient):
        return user.scope
    if not isinstance(user, AbstractBaseUser):
        return Scope.READ
    if getattr(user, "is_superuser", False):
        return Scope.REVIEW
    role = Membership.objects.filter(namespace=namespace, user_id=user.pk).values_list(
        "role", flat=True).first()
    return ROLE_SCOPES.get(Membership.Role(role), Scope.READ) if role else Scope.READ
