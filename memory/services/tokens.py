"""API tokens: made, checked, revoked — and the access audit log beside the operation log.

A token is ``pmem_`` and 43 URL-safe random characters (256 bits). The database keeps its
SHA-256 (``ApiToken.digest``) and its first characters (``prefix``), never the token: the
secret is in the hands of whoever ``token_create`` returned it to, once. A plain hash is enough
for a secret this long — nobody can guess their way back to it, so a slow password hash would
only cost every request (docs/decisions.md, "API tokens are stored as SHA-256").
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from memory.domain.scopes import LEGACY_SCOPE, Scope, clean_sources, token_refusal
from memory.models import ApiToken, AuditEntry, Namespace

TOKEN_PREFIX = "pmem_"
VISIBLE_CHARS = 12  # "pmem_" and 7 random characters: enough to tell tokens apart
#: Longer than any token we make or made: anything longer is refused before it is hashed.
MAX_TOKEN_CHARS = 256
#: ``last_used_at`` is written at most this often per token, not on every request.
LAST_USED_EVERY = timedelta(minutes=1)


class TokenRejected(Exception):
    """The presented token is unknown, malformed, revoked or expired (HTTP 401).

    The message never says whether a token exists in another namespace: an unknown token and a
    malformed one read the same."""


def token_digest(raw: str) -> str:
    """The stored form of a token: hex SHA-256 of its UTF-8 text (migration 0008 too)."""
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


def _new_secret() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def audit_record(*, namespace: Namespace | None, actor: str, action: str, target: str,
                 detail: dict[str, Any] | None = None) -> AuditEntry:
    """One row of the access audit log (``namespace`` None: an application token's, which
    belongs to no single namespace). Callers run it inside their own transaction."""
    return AuditEntry.objects.create(namespace=namespace, actor=actor, action=action,
                                     target=target[:200], detail=detail or {})


def _target(token: ApiToken) -> str:
    reach = f", namespaces {token.namespace_prefix}*" if token.namespace_prefix else ""
    return f"token {token.prefix}… ({token.name or token.client}{reach})"


#: What an application token's prefix may be: the start of a namespace name (lower-case
#: letters, digits, '-' and '_'; memory.services.namespaces.NAME_RE), leaving room for more.
NAMESPACE_PREFIX_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,98}$")


def clean_namespace_prefix(prefix: str) -> str:
    """``prefix`` if an application token may reach the namespaces starting with it, else
    ValueError saying why."""
    if not NAMESPACE_PREFIX_RE.match(prefix):
        raise ValueError("a namespace prefix is 1-99 characters: lower-case letters, digits, "
                         "'-' and '_', starting with a letter or digit")
    return prefix


def namespace_reached(token: ApiToken, name: str) -> bool:
    """Does ``token`` reach the namespace named ``name`` (existing or not)?"""
    if token.namespace_prefix:
        return name.startswith(token.namespace_prefix)
    return token.namespace is not None and token.namespace.name == name


@transaction.atomic
def token_create(*, namespace: Namespace | None = None, namespace_prefix: str = "",
                 client: str = "client", scope: Scope | str = LEGACY_SCOPE,
                 name: str = "", created_by: User | None = None,
                 expires_at: datetime | None = None, actor: str = "system",
                 secret: str | None = None, sources: Iterable[str] = ()) -> ApiToken:
    """A new token that reaches ``namespace`` only — or, an application token, every
    namespace whose name starts with ``namespace_prefix`` — within ``scope``, bound to
    ``sources`` (the trusted sources a write token may name, SPEC §8); audited.

    The returned instance carries the secret in ``key`` — the only time it exists outside
    the caller's hands. ``scope`` defaults to ``review`` (everything, as tokens always could);
    the explorer and ``pmem_token`` offer ``write`` first. ``secret`` is for the demo token,
    derived from the secret key so ``make run`` can print it again (``demo_secret``). Raises
    ValueError for a binding :func:`memory.domain.scopes.clean_sources` refuses."""
    if (namespace is None) == (not namespace_prefix):
        raise ValueError("a token reaches one namespace or the namespaces of one prefix")
    if namespace_prefix:
        clean_namespace_prefix(namespace_prefix)
    bound = clean_sources(sources)
    raw = secret or _new_secret()
    token = ApiToken.objects.create(
        namespace=namespace, namespace_prefix=namespace_prefix,
        digest=token_digest(raw), prefix=raw[:VISIBLE_CHARS],
        name=name[:100], client=(client or name or "client")[:100], scope=Scope(scope).value,
        created_by=created_by, expires_at=expires_at, sources=bound)
    audit_record(namespace=namespace, actor=actor, action=AuditEntry.Action.TOKEN_CREATE,
                 target=_target(token),
                 detail={"token": token.pk, "scope": token.scope, "client": token.client,
                         "expires_at": expires_at.isoformat() if expires_at else None,
                         "sources": bound, "namespace_prefix": namespace_prefix or None})
    token.key = raw
    return token


@transaction.atomic
def token_bind(*, token: ApiToken, sources: Iterable[str], actor: str) -> bool:
    """Bind ``token`` to exactly ``sources`` from its next request on (none: unbound);
    audited with the binding before and after. False when nothing changed (nothing written).
    Locks the token row, so two changes at once are both audited against what they saw."""
    bound = clean_sources(sources)
    locked = ApiToken.objects.select_for_update().get(pk=token.pk)
    if list(locked.sources) == bound:
        return False
    ApiToken.objects.filter(pk=token.pk).update(sources=bound)
    audit_record(namespace=token.namespace, actor=actor, action=AuditEntry.Action.TOKEN_BIND,
                 target=_target(token),
                 detail={"token": token.pk, "sources": bound, "was": list(locked.sources)})
    token.sources = bound
    return True


def demo_secret(generation: int = 0) -> str:
    """The demo namespace's token, derived from the secret key (HMAC) so that every
    ``make run`` can print the same token although the database keeps only its hash. Anyone
    who holds the secret key can forge sessions anyway; ``generation`` moves on past a demo
    token someone revoked."""
    mac = hmac.new(settings.SECRET_KEY.encode(), f"pmem demo token {generation}".encode(),
                   hashlib.sha256).digest()
    return TOKEN_PREFIX + base64.urlsafe_b64encode(mac).decode().rstrip("=")


@transaction.atomic
def token_revoke(*, token: ApiToken, actor: str) -> bool:
    """Revoke ``token`` from now on (its next request gets 401); audited. False when it
    was revoked already (nothing written)."""
    now = timezone.now()
    changed = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
        revoked_at=now, revoked_by=actor[:200])
    if not changed:
        return False
    token.revoked_at, token.revoked_by = now, actor[:200]
    audit_record(namespace=token.namespace, actor=actor, action=AuditEntry.Action.TOKEN_REVOKE,
                 target=_target(token), detail={"token": token.pk, "scope": token.scope})
    return True


def token_usable(token: ApiToken, now: datetime | None = None) -> bool:
    return token_refusal(revoked_at=token.revoked_at, expires_at=token.expires_at,
                         now=now or timezone.now()) is None


def _well_formed(raw: str) -> bool:
    # Tokens are printable ASCII without spaces; anything else (NUL bytes, 10 kB of
    # padding, non-ASCII) cannot be one, and is refused without a query.
    return 0 < len(raw) <= MAX_TOKEN_CHARS and raw.isascii() and raw.isprintable() \
        and " " not in raw


def token_authenticate(*, raw: str, now: datetime | None = None) -> ApiToken:
    """The usable token whose secret is ``raw`` (with its namespace), else TokenRejected.

    Looked up by digest (the unique index), then compared in constant time. Records the
    last use with one conditional UPDATE at most once per ``LAST_USED_EVERY`` per token."""
    now = now or timezone.now()
    if not _well_formed(raw):
        raise TokenRejected("invalid token")
    digest = token_digest(raw)
    token = ApiToken.objects.select_related("namespace").filter(digest=digest).first()
    if token is None or not hmac.compare_digest(token.digest, digest):
        raise TokenRejected("invalid token")
    refusal = token_refusal(revoked_at=token.revoked_at, expires_at=token.expires_at, now=now)
    if refusal is not None:
        raise TokenRejected(refusal)
    _touch(token, now)
    return token


def _touch(token: ApiToken, now: datetime) -> None:
    stale = now - LAST_USED_EVERY
    if token.last_used_at is not None and token.last_used_at > stale:
        return
    # Conditional: of concurrent requests that all saw a stale time, one writes.
    ApiToken.objects.filter(pk=token.pk).filter(
        Q(last_used_at__isnull=True) | Q(last_used_at__lte=stale)).update(last_used_at=now)
    token.last_used_at = now
