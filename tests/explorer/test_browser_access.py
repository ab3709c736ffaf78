"""In Chromium: an admin manages tokens (shown once, then revoked), the CSP check of the shared
fixture catches violations, and live regions still refresh without eval."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from playwright.sync_api import expect

from memory.models import ApiToken, AuditEntry
from memory.services import operation_apply
from tests.explorer.conftest import Browsing

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _whoami(b: Browsing, token: str) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(b.url("/api/v1/whoami/"),
                                      headers={"Authorization": f"Token {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_an_admin_makes_a_token_sees_it_once_and_revokes_it(browsing: Browsing, demo_ns: Any,
                                                            make_user: Any) -> None:
    b = browsing
    admin = make_user("admin", demo_ns)
    b.login(admin)
    b.goto(f"/ns/{demo_ns.name}/")
    b.page.get_by_role("link", name="Members & tokens").click()
    expect(b.page.locator("h1")).to_contain_text("Members and API tokens")
    form = b.page.get_by_role("form", name="New token")
    form.get_by_label("Name").fill("planner")
    form.get_by_label("Scope").select_option("read")
    form.get_by_label("Expires in days").fill("30")
    form.get_by_label("Sources it may claim").fill("hr, payroll")
    form.get_by_role("button", name="Create token").click()
    secret = b.page.locator("#new-token-secret").inner_text().strip()
    assert secret.startswith("pmem_")
    b.shot("access-new-token")
    status, body = _whoami(b, secret)
    assert status == 200 and (body["namespace"], body["scope"]) == (demo_ns.name, "read")
    # Shown once: the page, reloaded, has the prefix and the last use, not the secret.
    b.goto(f"/ns/{demo_ns.name}/access/")
    expect(b.page.locator("#new-token-secret")).to_have_count(0)
    row = b.page.locator("table.tokens tr", has_text="planner")
    expect(row).to_contain_text(secret[:12])
    expect(row.locator(".token-state")).to_have_text("active")
    expect(row.locator(".token-sources")).to_have_text("hr, payroll")
    assert secret not in b.page.content()
    row.get_by_role("button", name="Revoke").click()  # the confirm dialog is accepted
    expect(b.page.locator("table.tokens tr", has_text="planner").locator(".token-state")
           ).to_have_text("revoked")
    assert _whoami(b, secret) == (401, {"error": "token revoked"})
    expect(b.page.locator("table.audit")).to_contain_text("Token Revoke")
    expect(b.page.locator("table.audit")).to_contain_text(f"user:{admin.username}")
    assert AuditEntry.objects.filter(namespace=demo_ns).count() >= 2
    assert ApiToken.objects.get(name="planner").revoked_at is not None
    b.shot("access-revoked")
    assert b.errors == []


def test_an_admin_adds_a_member(browsing: Browsing, demo_ns: Any, make_user: Any) -> None:
    b = browsing
    b.login(make_user("admin", demo_ns))
    newcomer = make_user(None)
    b.goto(f"/ns/{demo_ns.name}/access/")
    form = b.page.get_by_role("form", name="Add a member or change a role")
    form.get_by_label("Username").fill(newcomer.username)
    form.get_by_label("Role").select_option("reviewer")
    form.get_by_role("button", name="Save").click()
    row = b.page.locator(f"tr[data-member='{newcomer.username}']")
    expect(row.locator(".member-role")).to_have_text("reviewer")
    b.shot("access-members")
    assert b.errors == []


def test_the_fixture_sees_csp_violations(browsing: Browsing, demo_ns: Any,
                                         make_user: Any) -> None:
    """The check every browser test runs at its end: an inline script or style on a page is
    refused by the browser and recorded."""
    b = browsing
    b.login(make_user("viewer", demo_ns))
    b.goto(f"/ns/{demo_ns.name}/")
    assert b.csp_violations == []
    b.page.evaluate("""() => {
        const s = document.createElement("script");
        s.textContent = "window.inlineRan = true";
        document.body.appendChild(s);
        document.body.insertAdjacentHTML("beforeend", '<p style="color: red">styled</p>');
    }""")
    for _ in range(50):  # the console events arrive asynchronously
        seen = " ".join(b.csp_violations)
        if "script-src" in seen and "style-src" in seen:
            break
        b.page.wait_for_timeout(100)
    assert "script-src" in seen and "style-src" in seen, b.csp_violations
    assert b.page.evaluate("() => window.inlineRan === undefined")  # it did not run
    b.csp_violations.clear()  # seen on purpose; the fixture's own check must pass


def test_actions_refresh_live_only_while_nobody_types(browsing: Browsing, demo_ns: Any,
                                                      make_user: Any) -> None:
    b = browsing
    b.login(make_user("reviewer", demo_ns))
    b.goto(f"/ns/{demo_ns.name}/cells/alice_home_city/")
    mark = "() => { document.getElementById('cell-actions').dataset.mark = 'old'; }"
    marked = "() => document.getElementById('cell-actions').dataset.mark === 'old'"
    replaced = "() => document.getElementById('cell-actions').dataset.mark === undefined"
    b.page.evaluate(mark)
    action = b.page.locator("details.action[data-op='contest']")
    action.locator("summary").click()
    action.locator("[name='reason']").fill("half-typed")
    operation_apply(namespace=demo_ns, key="alice_home_city", op="accept", value="Oslo",
                    actor="user:other")
    expect(b.page.get_by_test_id("current-value")).to_have_text("Oslo", timeout=15_000)
    assert b.page.evaluate(marked)  # someone is typing: the actions were left alone
    expect(action.locator("[name='reason']")).to_have_value("half-typed")
    action.locator("[name='reason']").fill("")
    b.page.locator("h1").click()  # focus leaves the form
    operation_apply(namespace=demo_ns, key="alice_home_city", op="accept", value="Rome",
                    actor="user:other")
    expect(b.page.get_by_test_id("current-value")).to_have_text("Rome", timeout=15_000)
    b.page.wait_for_function(replaced, timeout=15_000)  # idle again: refreshed
    assert b.errors == []


def test_the_api_docs_render_under_the_csp(browsing: Browsing, demo_ns: Any,
                                           make_user: Any) -> None:
    b = browsing
    b.login(make_user("viewer", demo_ns))
    b.goto("/api/docs/")
    expect(b.page.locator("#swagger-ui")).to_contain_text("whoami", timeout=20_000)
    expect(b.page.locator("#swagger-ui")).to_contain_text("Privacy erase")
    b.shot("api-docs")
