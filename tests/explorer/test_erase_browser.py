"""The privacy erase in a real browser (headless Chromium): a reviewer reviews what would go
and where else the values appear, types the key, erases, and follows a remaining mention; a
viewer never sees the action. Fails on any browser console error."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from memory.models import Cell, EraseAudit, Evidence, Membership
from memory.services import observation_ingest, operation_apply
from tests.explorer.conftest import Browsing

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def secret_ns(make_namespace: Any) -> Any:
    ns = make_namespace("erase-browser")
    observation_ingest(namespace=ns, text="passcode: Zanzibar-4471\nbackup_code: Zanzibar-4471",
                       source="sms Zanzibar-4471")
    observation_ingest(namespace=ns, text="I wrote ZANZIBAR-4471 on a note")
    observation_ingest(namespace=ns, text="colour: red")
    operation_apply(namespace=ns, key="colour", op="contest", value="blue", actor="user:x",
                    reason="the code Zanzibar-4471 is wrong", explicit=True)
    return ns


def test_a_reviewer_previews_confirms_and_erases(browsing: Browsing, secret_ns: Any,
                                                 make_user: Any) -> None:
    b = browsing
    user = make_user(Membership.Role.REVIEWER, secret_ns)
    b.login(user)
    b.goto(f"/ns/{secret_ns.name}/cells/passcode/")
    b.page.wait_for_function("() => window.pmemGraph && window.pmemGraph.renders >= 1")
    b.page.locator("details.action[data-op='erase'] summary").click()
    b.page.get_by_test_id("erase-link").click()
    expect(b.page).to_have_url(b.url(f"/ns/{secret_ns.name}/cells/passcode/erase/"))
    expect(b.page.get_by_test_id("erase-scope")).to_contain_text("1 version")
    mentions = b.page.get_by_test_id("erase-mentions")
    expect(mentions.locator("li")).to_have_count(3)
    expect(mentions.get_by_role("link", name="backup_code")).to_be_visible()
    b.shot("erase-preview")
    button = b.page.locator("#erase-submit")
    expect(button).to_be_disabled()
    b.page.fill("#erase-confirm", "passcod")
    expect(button).to_be_disabled()
    b.page.fill("#erase-confirm", "passcode")
    expect(button).to_be_enabled()
    button.click()
    expect(b.page.get_by_test_id("erase-outcome")).to_contain_text(
        "1 observation that supported or produced it was redacted")
    # After it, the supporting observation too: backup_code's value stays in it (another
    # fact's value is never redacted), so it is listed for a person to look at.
    expect(b.page.get_by_test_id("erase-mentions").locator("li")).to_have_count(4)
    b.shot("erase-done")
    assert not Cell.objects.filter(namespace=secret_ns, key="passcode").exists()
    redacted = Evidence.objects.filter(namespace=secret_ns).order_by("seq").first()
    assert "passcode" not in redacted.text and "Zanzibar" not in redacted.source
    assert "backup_code: Zanzibar-4471" in redacted.text  # a kept fact's value is never touched
    assert EraseAudit.objects.get(namespace=secret_ns).actor == f"user:{user.username}"
    # A remaining mention is one click away.
    b.page.get_by_test_id("erase-mentions").get_by_role("link", name="backup_code").click()
    expect(b.page.get_by_test_id("current-value")).to_have_text("Zanzibar-4471")
    assert b.errors == []


def test_a_viewer_never_sees_the_erase(browsing: Browsing, secret_ns: Any,
                                       make_user: Any) -> None:
    b = browsing
    b.login(make_user(Membership.Role.VIEWER, secret_ns))
    b.goto(f"/ns/{secret_ns.name}/cells/passcode/")
    b.page.wait_for_function("() => window.pmemGraph && window.pmemGraph.renders >= 1")
    expect(b.page.locator("details.action[data-op='erase']")).to_have_count(0)
    expect(b.page.locator("a[href*='/erase/']")).to_have_count(0)
    response = b.page.request.get(b.url(f"/ns/{secret_ns.name}/cells/passcode/erase/"))
    assert response.status == 403
    assert Cell.objects.filter(namespace=secret_ns, key="passcode").exists()
    assert b.errors == []
