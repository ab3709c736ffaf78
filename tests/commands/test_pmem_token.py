"""``manage.py pmem_token create|list|revoke`` as CONTRACT "Tokens and roles" states it."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from rest_framework.test import APIClient

from memory.models import ApiToken, AuditEntry

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def whoami(token: str) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return api.get("/api/v1/whoami/")


def test_create_prints_the_token_once_as_one_json_line_with_scope_write_by_default(ns):
    out = run("pmem_token", "create", ns.name, "--name", "planner")
    assert out.count("\n") == 1
    line = json.loads(out)
    assert set(line) == {"id", "namespace", "scope", "token"}
    assert (line["namespace"], line["scope"]) == (ns.name, "write")
    got = whoami(line["token"]).json()
    assert (got["namespace"], got["scope"], got["client"]) == (ns.name, "write", "planner")
    assert ApiToken.objects.get(pk=line["id"]).expires_at is None


@pytest.mark.parametrize("scope", ["read", "write", "review"])
def test_create_takes_a_scope_and_an_expiry(ns, scope):
    line = json.loads(run("pmem_token", "create", ns.name, "--scope", scope,
                          "--expires-days", "7"))
    token = ApiToken.objects.get(pk=line["id"])
    assert token.scope == line["scope"] == scope
    assert abs(token.expires_at - (timezone.now() + timedelta(days=7))) < timedelta(minutes=1)


def test_list_prints_one_line_per_token_without_the_secret(ns):
    made = [json.loads(run("pmem_token", "create", ns.name, "--name", f"agent-{i}"))
            for i in range(2)]
    whoami(made[0]["token"])
    out = run("pmem_token", "list", ns.name)
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["id"] for r in rows] == [made[1]["id"], made[0]["id"]]
    assert {"id", "prefix", "name", "scope", "created_at", "expires_at", "last_used_at",
            "revoked_at", "state"} <= set(rows[0])
    assert rows[1]["last_used_at"] is not None and rows[0]["last_used_at"] is None
    for m in made:
        assert m["token"] not in out
    assert rows[0]["prefix"] == made[1]["token"][:len(rows[0]["prefix"])]


def test_revoke_makes_the_next_request_401_and_is_audited(ns):
    line = json.loads(run("pmem_token", "create", ns.name))
    assert whoami(line["token"]).status_code == 200
    assert json.loads(run("pmem_token", "revoke", str(line["id"])))["revoked"] is True
    assert whoami(line["token"]).status_code == 401
    rows = [json.loads(x) for x in run("pmem_token", "list", ns.name).splitlines()]
    assert rows[0]["state"] == "revoked"
    assert list(AuditEntry.objects.filter(namespace=ns).order_by("id")
                .values_list("action", "actor")) == [
        ("token_create", "cli"), ("token_revoke", "cli")]


def test_unknown_namespace_id_and_bad_expiry_are_command_errors(ns):
    with pytest.raises(CommandError, match="no namespace"):
        run("pmem_token", "create", "no-such-space")
    with pytest.raises(CommandError, match="no namespace"):
        run("pmem_token", "list", "no-such-space")
    with pytest.raises(CommandError, match="no token with id"):
        run("pmem_token", "revoke", "999999999")
    with pytest.raises(CommandError, match="at least 1"):
        run("pmem_token", "create", ns.name, "--expires-days", "0")


# --- sources bound to tokens (CONTRACT "Tokens bound to sources") ------------------------------


def _observe(token: str, ns, source: str):
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return api.post(f"/api/v1/namespaces/{ns.name}/observations/",
                    {"text": "salary = 555k", "source": source}, format="json")


def test_create_binds_the_repeated_sources_and_list_shows_them(ns):
    run("pmem_trust", ns.name, "hr", "9")
    run("pmem_trust", ns.name, "payroll", "5")
    line = json.loads(run("pmem_token", "create", ns.name, "--source", "hr",
                          "--source", "payroll"))
    assert line["sources"] == ["hr", "payroll"]
    unbound = json.loads(run("pmem_token", "create", ns.name))
    assert set(unbound) == {"id", "namespace", "scope", "token"}
    rows = {r["id"]: r for r in map(json.loads, run("pmem_token", "list", ns.name).splitlines())}
    assert rows[line["id"]]["sources"] == ["hr", "payroll"] and rows[unbound["id"]]["sources"] == []
    assert _observe(line["token"], ns, "hr").status_code == 202
    assert _observe(unbound["token"], ns, "hr").status_code == 403
    created = AuditEntry.objects.get(namespace=ns, action="token_create",
                                     detail__token=line["id"])
    assert created.detail["sources"] == ["hr", "payroll"]


def test_bind_changes_a_tokens_sources_audited(ns):
    run("pmem_trust", ns.name, "hr", "9")
    line = json.loads(run("pmem_token", "create", ns.name))
    assert json.loads(run("pmem_token", "bind", str(line["id"]), "--source", "hr")) == {
        "id": line["id"], "namespace": ns.name, "sources": ["hr"], "changed": True}
    assert _observe(line["token"], ns, "hr").status_code == 202
    assert json.loads(run("pmem_token", "bind", str(line["id"])))["sources"] == []
    assert _observe(line["token"], ns, "hr").status_code == 403
    assert list(AuditEntry.objects.filter(namespace=ns, action="token_bind")
                .values_list("actor", flat=True)) == ["cli", "cli"]
    with pytest.raises(CommandError, match="at most 200"):
        run("pmem_token", "bind", str(line["id"]), "--source", "x" * 201)


def test_pmem_trust_sets_and_clears_levels_audited(ns):
    assert json.loads(run("pmem_trust", ns.name, "hr", "9"))["trust"] == {"hr": 9}
    assert json.loads(run("pmem_trust", ns.name, "hr", "--clear"))["trust"] == {}
    assert list(AuditEntry.objects.filter(namespace=ns).order_by("id")
                .values_list("action", "actor", "target")) == [
        ("trust_set", "cli", "source hr"), ("trust_clear", "cli", "source hr")]


def test_pmem_mcp_binds_only_the_sessions_own_token(ns):
    with pytest.raises(CommandError, match="--source binds the session's own token"):
        call_command("pmem_mcp", "--token", "pmem_x", "--source", "hr")
