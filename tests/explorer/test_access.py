"""Members and tokens in the explorer (admins only, every change audited), the login lockout,
and the Content-Security-Policy of every page — without a browser (test_browser_access.py has
the browser)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from memory.models import ApiToken, AuditEntry, Membership
from memory.services import token_authenticate, token_create

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def access_url(ns: Any, rest: str = "") -> str:
    return f"/ns/{ns.name}/access/{rest}"


@pytest.fixture
def admin(make_user: Any, ns: Any) -> Any:
    return make_user("admin", ns)


# --- who may manage --------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["viewer", "reviewer"])
def test_viewers_and_reviewers_may_not_manage_access(role: str, ns: Any, make_user: Any) -> None:
    client = client_for(make_user(role, ns))
    assert client.get(access_url(ns)).status_code == 403
    assert client.post(access_url(ns, "tokens/"), {"name": "x", "scope": "review"}).status_code == 403
    assert client.post(access_url(ns, "members/"), {"username": "x", "role": "admin"}).status_code == 403
    assert not ApiToken.objects.filter(namespace=ns).exists()
    assert f'href="{access_url(ns)}"' not in client.get(f"/ns/{ns.name}/").content.decode()


def test_a_non_member_gets_404_on_the_access_pages(ns: Any, make_user: Any) -> None:
    client = client_for(make_user(None))
    assert client.get(access_url(ns)).status_code == 404
    assert client.post(access_url(ns, "tokens/"), {"name": "x", "scope": "read"}).status_code == 404


def test_admins_and_superusers_see_the_access_page(ns: Any, admin: Any, make_user: Any) -> None:
    for user in (admin, make_user(None, superuser=True)):
        client = client_for(user)
        assert client.get(access_url(ns)).status_code == 200
        assert f'href="{access_url(ns)}"' in client.get(f"/ns/{ns.name}/").content.decode()


def test_an_admin_is_also_a_reviewer(ns: Any, admin: Any) -> None:
    from memory.services import operation_apply

    operation_apply(namespace=ns, key="city", op="accept", value="Paris", actor="user:t")
    response = client_for(admin).post(f"/ns/{ns.name}/cells/city/operations/",
                                      {"op": "revoke", "reason": "wrong"})
    assert response.status_code == 302


# --- tokens ----------------------------------------------------------------------------------


def _secret_in(body: str) -> str:
    match = re.search(r'<code id="new-token-secret" class="secret">([^<]+)</code>', body)
    assert match, "the new token is shown"
    return match.group(1)


def test_an_admin_creates_a_token_and_sees_it_once(ns: Any, admin: Any) -> None:
    client = client_for(admin)
    response = client.post(access_url(ns, "tokens/"),
                           {"name": "planner", "scope": "read", "expires_days": "30"})
    assert response.status_code == 200 and "no-store" in response["Cache-Control"]
    secret = _secret_in(response.content.decode())
    token = token_authenticate(raw=secret)
    assert (token.namespace_id, token.scope, token.name, token.created_by_id) == (
        ns.pk, "read", "planner", admin.pk)
    assert token.expires_at is not None
    page = client.get(access_url(ns)).content.decode()
    assert secret not in page and token.prefix in page and "planner" in page
    assert AuditEntry.objects.get(namespace=ns, action="token_create").actor == \
        f"user:{admin.username}"


def test_an_admin_binds_a_new_token_to_sources_and_the_page_shows_them(ns: Any,
                                                                      admin: Any) -> None:
    from memory.services import trust_set

    trust_set(namespace=ns, source="hr", level=9, actor="cli")
    client = client_for(admin)
    response = client.post(access_url(ns, "tokens/"),
                           {"name": "hr-bot", "scope": "write", "sources": "hr, payroll,hr"})
    token = token_authenticate(raw=_secret_in(response.content.decode()))
    assert token.sources == ["hr", "payroll"]
    page = client.get(access_url(ns)).content.decode()
    assert "hr, payroll" in page and "<code>hr</code> (9)" in page
    created = AuditEntry.objects.get(namespace=ns, action="token_create")
    assert created.detail["sources"] == ["hr", "payroll"]


def test_token_form_errors_are_shown_not_raised(ns: Any, admin: Any) -> None:
    client = client_for(admin)
    for data in ({"name": "", "scope": "read"}, {"name": "x", "scope": "root"},
                 {"name": "x", "scope": "read", "expires_days": "0"},
                 {"name": "x", "scope": "read", "expires_days": "abc"},
                 {"name": "x", "scope": "write", "sources": "x" * 201},
                 {"name": "x", "scope": "write", "sources": ",".join(f"s{i}" for i in range(33))}):
        response = client.post(access_url(ns, "tokens/"), data)
        assert response.status_code == 422 and "error-text" in response.content.decode()
    assert not ApiToken.objects.filter(namespace=ns).exists()


def test_an_admin_revokes_a_token_of_their_namespace_only(ns: Any, admin: Any,
                                                          make_namespace: Any) -> None:
    mine = token_create(namespace=ns, name="mine")
    theirs = token_create(namespace=make_namespace("other"), name="theirs")
    client = client_for(admin)
    assert client.post(access_url(ns, f"tokens/{theirs.pk}/revoke/")).status_code == 404
    assert ApiToken.objects.get(pk=theirs.pk).revoked_at is None
    assert client.post(access_url(ns, f"tokens/{mine.pk}/revoke/")).status_code == 302
    assert ApiToken.objects.get(pk=mine.pk).revoked_by == f"user:{admin.username}"
    page = client.get(access_url(ns)).content.decode()
    assert re.search(rf'data-token="{mine.pk}" class="token-revoked"', page)
    assert AuditEntry.objects.filter(namespace=ns, action="token_revoke").count() == 1


# --- members ---------------------------------------------------------------------------------


def test_an_admin_adds_rerolls_and_removes_members_each_change_audited(
        ns: Any, admin: Any, make_user: Any) -> None:
    bob = make_user(None)
    client = client_for(admin)
    assert client.post(access_url(ns, "members/"),
                       {"username": bob.username, "role": "viewer"}).status_code == 302
    assert client.post(access_url(ns, "members/"),
                       {"username": bob.username, "role": "reviewer"}).status_code == 302
    assert Membership.objects.get(namespace=ns, user=bob).role == "reviewer"
    assert client.post(access_url(ns, f"members/{bob.pk}/remove/")).status_code == 302
    assert not Membership.objects.filter(namespace=ns, user=bob).exists()
    rows = list(AuditEntry.objects.filter(namespace=ns, target=f"user {bob.username}")
                .order_by("id").values_list("action", "actor"))
    assert rows == [("member_set", f"user:{admin.username}")] * 2 + [
        ("member_remove", f"user:{admin.username}")]
    page = client.get(access_url(ns)).content.decode()
    assert page.count(f"user {bob.username}") == 3  # the audit log shows all three


def test_member_errors_unknown_user_and_last_admin(ns: Any, admin: Any) -> None:
    client = client_for(admin)
    response = client.post(access_url(ns, "members/"), {"username": "nobody-here", "role": "viewer"})
    assert response.status_code == 422 and "No user with this name" in response.content.decode()
    response = client.post(access_url(ns, "members/"), {"username": admin.username,
                                                        "role": "viewer"})
    assert response.status_code == 409 and "only admin" in response.content.decode()
    assert client.post(access_url(ns, f"members/{admin.pk}/remove/")).status_code == 409
    assert Membership.objects.get(namespace=ns, user=admin).role == "admin"
    assert client.post(access_url(ns, "members/999999999/remove/")).status_code == 404


def test_the_access_pages_want_post_and_csrf(ns: Any, admin: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin)
    assert client.post(access_url(ns, "tokens/"), {"name": "x", "scope": "read"}).status_code == 403
    assert client.get(access_url(ns, "tokens/")).status_code == 405
    assert not ApiToken.objects.filter(namespace=ns).exists()


# --- login lockout ---------------------------------------------------------------------------


def _login(client: Client, username: str, password: str, ip: str = "10.0.0.1") -> Any:
    return client.post("/accounts/login/", {"username": username, "password": password},
                       REMOTE_ADDR=ip)


def test_repeated_failed_logins_lock_that_user_from_that_address(make_user: Any,
                                                                  settings: Any) -> None:
    from tests.explorer.conftest import PASSWORD

    assert settings.AXES_ENABLED and settings.AXES_FAILURE_LIMIT == 5
    ada, bob = make_user("viewer"), make_user("viewer")
    client = Client()
    for _ in range(4):
        assert _login(client, ada.username, "wrong").status_code == 200  # the form again
    assert _login(client, ada.username, "wrong").status_code == 429  # the fifth: locked
    locked = _login(client, ada.username, PASSWORD)  # even the right password, now
    assert locked.status_code == 429 and "Too many failed logins" in locked.content.decode()
    assert "_auth_user_id" not in client.session
    assert _login(Client(), bob.username, PASSWORD).status_code == 302  # others log in
    assert _login(Client(), ada.username, PASSWORD, ip="10.0.0.2").status_code == 302


def test_a_successful_login_resets_the_failure_count(make_user: Any) -> None:
    from tests.explorer.conftest import PASSWORD

    ada = make_user("viewer")
    for _ in range(4):
        _login(Client(), ada.username, "wrong")
    assert _login(Client(), ada.username, PASSWORD).status_code == 302
    for _ in range(4):
        assert _login(Client(), ada.username, "wrong").status_code == 200


# --- Content-Security-Policy -----------------------------------------------------------------

TEMPLATES = ROOT / "templates"
COMMENT = re.compile(r"\{#.*?#\}", re.S)  # template comments may name what they avoid
INLINE = [
    (re.compile(r"<script\b(?![^>]*\bsrc=)[^>]*>", re.I), "an inline <script>"),
    (re.compile(r"<style\b", re.I), "a <style> element"),
    (re.compile(r"\sstyle\s*=", re.I), "a style= attribute"),
    (re.compile(r"\son[a-z]+\s*=", re.I), "an on...= event handler attribute"),
    (re.compile(r"\bhx-on\b|\bhx-on[:-]", re.I), "an hx-on attribute (htmx evaluates it)"),
    (re.compile(r"hx-(?:vals|vars|headers)\s*=\s*['\"]\s*(?:js|javascript):", re.I),
     "an hx-vals/hx-headers js: expression"),
    (re.compile(r"hx-trigger\s*=\s*['\"][^'\"]*\[", re.I), "an hx-trigger filter (eval)"),
    (re.compile(r"javascript:", re.I), "a javascript: URL"),
]


def test_no_template_holds_inline_script_style_or_evaluated_htmx() -> None:
    offences = []
    for path in sorted(TEMPLATES.rglob("*.html")):
        text = COMMENT.sub("", path.read_text())
        for pattern, what in INLINE:
            # json_script's <script type="application/json"> is data, not script.
            for match in pattern.finditer(text):
                if "application/json" in match.group(0):
                    continue
                offences.append(f"{path.relative_to(ROOT)}: {what}: {match.group(0)!r}")
    assert offences == []


def _explorer_pages() -> list[str]:
    routes = []

    def walk(patterns: list[Any], prefix: str = "") -> None:
        for p in patterns:
            if isinstance(p, URLResolver):
                walk(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern):
                routes.append(prefix + str(p.pattern))

    walk(get_resolver().url_patterns)
    return [r for r in routes if r == "" or r.startswith(("ns/", "accounts/login"))]


def test_every_explorer_page_sends_a_strict_csp(ns: Any, admin: Any) -> None:
    from memory.services import operation_apply

    operation_apply(namespace=ns, key="city", op="accept", value="Paris", actor="user:t")
    client = client_for(admin)
    checked = 0
    for route in _explorer_pages():
        path = "/" + re.sub(r"<(?:\w+:)?(\w+)>", lambda m: {"ns": ns.name, "key": "city"}.get(
            m.group(1), "1"), route)
        response = client.get(path, HTTP_ACCEPT="text/html")
        policy = response.get("Content-Security-Policy", "")
        assert policy, f"no CSP on {path} ({response.status_code})"
        directives = dict(d.strip().split(" ", 1) for d in policy.split(";") if " " in d.strip())
        assert directives["script-src"] == "'self'" and directives["style-src"] == "'self'"
        assert directives["default-src"] == "'none'" and directives["frame-ancestors"] == "'none'"
        assert "unsafe" not in policy
        checked += 1
    assert checked >= 10
    login = Client().get("/accounts/login/")
    assert "script-src 'self'" in login["Content-Security-Policy"]
