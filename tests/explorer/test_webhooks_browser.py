"""In Chromium: an admin makes a webhook (its secret shown once), sees its deliveries and its
failures, resumes and deletes it; the page's controls are finger-sized on a phone."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from memory.models import WebhookEndpoint
from memory.services import observations_ingest
from memory.services.webhooks import webhook_claim, webhooks_deliver
from tests.explorer.conftest import Browsing
from tests.support.webhook_receiver import WebhookReceiver

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _private_targets(settings: Any) -> None:
    settings.PMEM_WEBHOOK_ALLOW_PRIVATE = True
    settings.PMEM_WEBHOOK_TIMEOUT = 2.0


def _deliver(endpoint_id: int) -> None:
    with webhook_claim(endpoint_id) as held:
        assert held
        webhooks_deliver(endpoint_id=endpoint_id)


def test_an_admin_makes_a_webhook_watches_it_fail_resumes_and_deletes_it(
        browsing: Browsing, demo_ns: Any, make_user: Any) -> None:
    b = browsing
    b.login(make_user("admin", demo_ns))
    with WebhookReceiver() as receiver:
        b.goto(f"/ns/{demo_ns.name}/")
        b.page.get_by_role("link", name="Webhooks").click()
        expect(b.page.locator("h1")).to_contain_text("Webhooks")
        form = b.page.get_by_role("form", name="New webhook")
        form.get_by_label("URL").fill("ftp://example.com/")
        form.get_by_role("button", name="Create webhook").click()
        expect(b.page.locator(".error-text").first).to_contain_text("http")
        b.expect_console_error("422")
        form = b.page.get_by_role("form", name="New webhook")
        form.get_by_label("URL").fill(receiver.url)
        form.get_by_label("Ops it receives").fill("accept, erase")
        form.get_by_role("button", name="Create webhook").click()
        secret = b.page.locator("#new-webhook-secret").inner_text().strip()
        assert secret.startswith("whsec_")
        endpoint = WebhookEndpoint.objects.get(namespace=demo_ns)
        assert endpoint.ops == ["accept", "erase"]

        observations_ingest(namespace=demo_ns, observations=[{"text": "city = Paris"}])
        _deliver(endpoint.pk)
        assert [e["value"] for e in receiver.verified(secret)] == ["Paris"]
        b.goto(f"/ns/{demo_ns.name}/webhooks/")
        expect(b.page.locator("#new-webhook-secret")).to_have_count(0)
        assert secret not in b.page.content()
        card = b.page.locator(f"article[data-webhook='{endpoint.pk}']")
        expect(card.locator(".webhook-state")).to_contain_text("delivering")
        expect(card.locator("tr.delivery-delivered")).to_have_count(1)

        receiver.answer(500)
        observations_ingest(namespace=demo_ns, observations=[{"text": "city = Rome"}])
        _deliver(endpoint.pk)
        b.goto(f"/ns/{demo_ns.name}/webhooks/")
        expect(card.locator(".webhook-state")).to_contain_text("failing")
        expect(card.locator(".error-text")).to_contain_text("HTTP 500")
        b.shot("webhooks-failing")

        receiver.answer(204)
        card.get_by_role("button", name="Resume now").click()
        expect(card.get_by_role("button", name="Resume now")).to_have_count(0)
        endpoint.refresh_from_db()
        assert endpoint.failing_since is None and endpoint.next_attempt_at is None
        _deliver(endpoint.pk)
        assert [e["value"] for e in receiver.verified(secret)] == ["Paris", "Rome"]

        card.get_by_role("button", name="Delete").click()  # the confirm dialog is accepted
        expect(b.page.locator("article.webhook")).to_have_count(0)
        assert not WebhookEndpoint.objects.filter(namespace=demo_ns).exists()
    b.assert_no_csp_violation()
    b.assert_no_error()


def test_the_webhooks_page_is_for_admins_only(browsing: Browsing, demo_ns: Any,
                                              make_user: Any) -> None:
    b = browsing
    b.login(make_user("reviewer", demo_ns))
    response = b.goto(f"/ns/{demo_ns.name}/webhooks/")
    assert response.status == 403
    b.expect_console_error("403")
    expect(b.page.get_by_role("link", name="Webhooks")).to_have_count(0)


def test_the_webhook_controls_are_finger_sized_on_a_phone(chromium: Any, live_server: Any,
                                                          demo_ns: Any, make_user: Any) -> None:
    with WebhookReceiver() as receiver:
        WebhookEndpoint.objects.create(namespace=demo_ns, url=receiver.url, secret="whsec_eA==",
                                       created_by="test", attempts=1, failing_since="2030-01-01T00:00Z")
        b = Browsing(chromium, live_server.url, viewport={"width": 390, "height": 844},
                     has_touch=True, is_mobile=True)
        try:
            b.login(make_user("admin", demo_ns))
            b.goto(f"/ns/{demo_ns.name}/webhooks/")
            for name in ("Resume now", "Delete", "Create webhook"):
                box = b.page.get_by_role("button", name=name).first.bounding_box()
                assert box["width"] >= 44 and box["height"] >= 44, (name, box)
            b.assert_no_csp_violation()
            b.assert_no_error()
        finally:
            b.context.close()
