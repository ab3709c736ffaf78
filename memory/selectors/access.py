"""Who may do what in a namespace: the namespace a name gives, a user's role there, the
namespaces a user sees, the namespace's tokens (never a secret: the database has none), its
members, its sources' trust levels and the access audit log.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet
from django.utils import timezone

from memory.domain import BIGINT_MAX
from memory.domain.scopes import token_refusal
from memory.models import ApiToken, AuditEntry, Membership, Namespace, SourceTrust


def namespace_named(name: str) -> Namespace | None:
    return Namespace.objects.filter(name=name).first()


def member_role(*, namespace: Namespace, user_id: int) -> str | None:
    """The role of user ``user_id`` in ``namespace``; None when not a member."""
    return (Membership.objects.filter(namespace=namespace, user_id=user_id)
            .values_list("role", flat=True).first())


def member_roles(*, user_id: int | None) -> dict[int, str]:
    """The user's role in each namespace it is a member of, by namespace id."""
    return dict(Membership.objects.filter(user_id=user_id or 0)
                .values_list("namespace_id", "role"))


def visible_namespaces(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Namespace]:
    """The namespaces ``user`` sees: every one for a superuser, else those it is a member of."""
    if getattr(user, "is_superuser", False):
        return Namespace.objects.all()
    if user.pk is None:  # anonymous: no memberships
        return Namespace.objects.none()
    return Namespace.objects.filter(members__user_id=user.pk)


def token_in(*, namespace: Namespace, token_id: int) -> ApiToken | None:
    if token_id > BIGINT_MAX:
        return None
    return (ApiToken.objects.select_related("namespace")
            .filter(namespace=namespace, pk=token_id).first())


def tokens_list(*, namespace: Namespace) -> QuerySet[ApiToken]:
    """The namespace's tokens, newest first (never a secret: the database has none)."""
    return (ApiToken.objects.filter(namespace=namespace).select_related("created_by")
            .order_by("-id"))


def token_row(token: ApiToken) -> dict[str, Any]:
    """One token as ``pmem_token list`` prints it and the explorer shows it."""
    refusal = token_refusal(revoked_at=token.revoked_at, expires_at=token.expires_at,
                            now=timezone.now())
    return {"id": token.pk, "namespace": token.namespace.name if token.namespace else None,
            **({"namespace_prefix": token.namespace_prefix} if token.namespace_prefix else {}),
            "prefix": token.prefix,
            "name": token.name, "client": token.client, "scope": token.scope,
            "created_by": token.created_by.get_username() if token.created_by else None,
            "created_at": token.created_at, "expires_at": token.expires_at,
            "last_used_at": token.last_used_at, "revoked_at": token.revoked_at,
            "sources": list(token.sources),
            "state": (refusal or "token active").removeprefix("token ")}


def token_rows(*, namespace: Namespace) -> list[dict[str, Any]]:
    return [token_row(t) for t in tokens_list(namespace=namespace).select_related("namespace")]


def application_token_rows(*, namespace_prefix: str) -> list[dict[str, Any]]:
    """The application tokens of exactly this prefix, newest first (no secret)."""
    return [token_row(t) for t in ApiToken.objects.filter(namespace_prefix=namespace_prefix)
            .select_related("created_by").order_by("-id")]


def source_trust_list(*, namespace: Namespace) -> list[tuple[str, int]]:
    """The namespace's sources with a trust level, most trusted first (SPEC §8)."""
    return list(SourceTrust.objects.filter(namespace=namespace).order_by("-level", "source")
                .values_list("source", "level"))


def members_list(*, namespace: Namespace) -> QuerySet[Membership]:
    return (Membership.objects.filter(namespace=namespace).select_related("user")
            .order_by("user__username"))


def audit_list(*, namespace: Namespace, limit: int = 100) -> list[AuditEntry]:
    """The access audit log of a namespace, newest first."""
    return list(AuditEntry.objects.filter(namespace=namespace).order_by("-id")[:limit])
