"""API tokens at rest and in use: hashed, prefixed, scoped, expiring, revocable, audited;
members and their roles, audited."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memory.domain.scopes import Scope, ScopeDenied, require_scope, scope_allows
from memory.models import ApiToken, AuditEntry, Membership
from memory.services import (
    LastAdmin,
    TokenRejected,
    membership_remove,
    membership_set,
    token_authenticate,
    token_create,
    token_revoke,
)
from memory.services.tokens import LAST_USED_EVERY, VISIBLE_CHARS

pytestmark = pytest.mark.django_db


def test_a_token_is_stored_as_its_sha256_with_a_visible_prefix_only(ns):
    token = token_create(namespace=ns, client="agent", scope="write", name="agent")
    secret = token.key
    assert secret.startswith("pmem_") and len(secret) >= 40
    stored = ApiToken.objects.get(pk=token.pk)
    assert stored.key is None  # the secret is on the returned instance only
    assert stored.digest == hashlib.sha256(secret.encode()).hexdigest()
    assert stored.prefix == secret[:VISIBLE_CHARS] and len(stored.prefix) < len(secret) // 3
    row = {f.attname: getattr(stored, f.attname) for f in ApiToken._meta.concrete_fields}
    assert not any(secret in str(value) for value in row.values())


def test_authenticate_finds_the_token_by_its_secret_and_nothing_else(ns):
    token = token_create(namespace=ns, client="agent")
    assert token_authenticate(raw=token.key).pk == token.pk
    for wrong in (token.key[:-1], token.key + "x", token.key.upper(), ApiToken.objects.get(
            pk=token.pk).digest, token.prefix):
        with pytest.raises(TokenRejected, match="invalid token"):
            token_authenticate(raw=wrong)


@pytest.mark.parametrize("raw", ["", "a\x00b", "x" * 10_000, "pmem_\u00e9t\u00e9", "two words",
                                 "tab\there"])
def test_malformed_tokens_are_refused_without_a_query(ns, raw):
    with CaptureQueriesContext(connection) as queries, pytest.raises(TokenRejected):
        token_authenticate(raw=raw)
    assert len(queries) == 0


def test_a_revoked_token_is_refused_and_the_revocation_is_audited(ns):
    token = token_create(namespace=ns, client="agent", actor="user:ada")
    assert token_revoke(token=token, actor="user:ada") is True
    with pytest.raises(TokenRejected, match="revoked"):
        token_authenticate(raw=token.key)
    assert token_revoke(token=token, actor="user:ada") is False  # once only
    actions = list(AuditEntry.objects.filter(namespace=ns).order_by("id")
                   .values_list("action", "actor"))
    assert actions == [("token_create", "user:ada"), ("token_revoke", "user:ada")]
    assert token.key not in str(list(AuditEntry.objects.values_list("target", "detail")))


def test_an_expired_token_is_refused(ns):
    token = token_create(namespace=ns, client="agent",
                         expires_at=timezone.now() + timedelta(days=1))
    assert token_authenticate(raw=token.key).pk == token.pk
    with pytest.raises(TokenRejected, match="expired"):
        token_authenticate(raw=token.key, now=timezone.now() + timedelta(days=1, seconds=1))


def test_last_use_is_written_at_most_once_a_minute(ns):
    token = token_create(namespace=ns, client="agent")
    t0 = timezone.now()
    token_authenticate(raw=token.key, now=t0)
    assert ApiToken.objects.get(pk=token.pk).last_used_at == t0
    with CaptureQueriesContext(connection) as queries:
        for seconds in (1, 20, 59):
            token_authenticate(raw=token.key, now=t0 + timedelta(seconds=seconds))
    assert [q["sql"] for q in queries.captured_queries if "UPDATE" in q["sql"]] == []
    assert len(queries) == 3  # one lookup per request, no write
    later = t0 + LAST_USED_EVERY + timedelta(seconds=1)
    token_authenticate(raw=token.key, now=later)
    assert ApiToken.objects.get(pk=token.pk).last_used_at == later


def test_tokens_default_to_review_as_they_always_reached_everything(ns):
    assert token_create(namespace=ns).scope == "review"


def test_scopes_are_ordered_read_write_review():
    assert scope_allows("review", "write") and scope_allows("write", "read")
    assert scope_allows(Scope.READ, Scope.READ)
    assert not scope_allows("read", "write") and not scope_allows("write", "review")
    with pytest.raises(ScopeDenied, match="scope is write; this needs scope review"):
        require_scope("write", "review")


# --- members -------------------------------------------------------------------------------


def _user(name: str):
    return get_user_model().objects.create_user(username=name, password="pw")


def test_membership_changes_are_audited_once_each(ns):
    ada = _user("ada-audit")
    membership_set(namespace=ns, user=ada, role="viewer", actor="user:root")
    membership_set(namespace=ns, user=ada, role="viewer", actor="user:root")  # no change
    membership_set(namespace=ns, user=ada, role="reviewer", actor="user:root")
    assert membership_remove(namespace=ns, user=ada, actor="user:root") is True
    assert membership_remove(namespace=ns, user=ada, actor="user:root") is False
    rows = list(AuditEntry.objects.filter(namespace=ns).order_by("id")
                .values_list("action", "detail"))
    assert [(a, d.get("role"), d.get("was")) for a, d in rows] == [
        ("member_set", "viewer", None), ("member_set", "reviewer", "viewer"),
        ("member_remove", None, "reviewer")]


def test_the_last_admin_can_be_neither_demoted_nor_removed(ns):
    ada, bob = _user("ada-admin"), _user("bob-admin")
    membership_set(namespace=ns, user=ada, role="admin")
    with pytest.raises(LastAdmin):
        membership_set(namespace=ns, user=ada, role="reviewer")
    with pytest.raises(LastAdmin):
        membership_remove(namespace=ns, user=ada, actor="user:ada")
    membership_set(namespace=ns, user=bob, role="admin")
    membership_set(namespace=ns, user=ada, role="viewer")
    assert Membership.objects.get(namespace=ns, user=ada).role == "viewer"
