"""Webhook deliveries to a real HTTP receiver on 127.0.0.1 (PMEM_WEBHOOK_ALLOW_PRIVATE=1 for
these tests): signed, in commit order, one at a time, retried with backoff from the database,
paused after failing long enough, never past an erase (SPEC §12)."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from memory.models import WebhookDelivery, WebhookEndpoint
from memory.services import cell_erase, namespace_delete, observations_ingest
from memory.services.webhooks import (
    TargetRefused,
    webhook_claim,
    webhook_create,
    webhook_resume,
    webhooks_deliver,
    webhooks_due,
)
from tests.support.webhook_receiver import WebhookReceiver

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _private_targets(settings):
    settings.PMEM_WEBHOOK_ALLOW_PRIVATE = True
    settings.PMEM_WEBHOOK_RETRY_BASE = 0.2
    settings.PMEM_WEBHOOK_RETRY_CAP = 1.0
    settings.PMEM_WEBHOOK_TIMEOUT = 1.0
    settings.PMEM_WEBHOOK_CONNECT_TIMEOUT = 1.0


@pytest.fixture
def receiver():
    with WebhookReceiver() as r:
        yield r


def told(ns, *lines: str) -> None:
    observations_ingest(namespace=ns, observations=[{"text": line} for line in lines])


def deliver(endpoint: WebhookEndpoint):
    with webhook_claim(endpoint.pk) as held:
        assert held
        return webhooks_deliver(endpoint_id=endpoint.pk)


def deliver_until_idle(endpoint: WebhookEndpoint, rounds: int = 50):
    for _ in range(rounds):
        run = deliver(endpoint)
        if run.outcome == "idle":
            return run
        time.sleep(0.25)
    raise AssertionError(f"still not idle: {run}")


def test_events_committed_after_the_endpoint_are_delivered_signed_and_in_order(ns, receiver):
    told(ns, "city = Paris")  # before the endpoint: not delivered
    endpoint = webhook_create(namespace=ns, url=receiver.url, actor="test")
    told(ns, "city = Lyon", "team = blue", "city = Nice")

    run = deliver(endpoint)

    assert run.outcome == "idle" and run.delivered == 3
    events = receiver.verified(endpoint.secret)
    assert [(e["key"], e["value"]) for e in events] == [
        ("city", "Lyon"), ("team", "blue"), ("city", "Nice")]
    cursors = [e["cursor"] for e in events]
    assert cursors == sorted(cursors) and len(set(cursors)) == 3
    assert all(e["namespace"] == ns.name for e in events)
    assert events[2]["previous"]["value"] == "Lyon"
    ids = [r.webhook_id for r in receiver.delivered()]
    assert ids == [f"evt_{ns.pk}_{c}" for c in cursors]
    endpoint.refresh_from_db()
    assert endpoint.delivered == cursors[-1]
    assert deliver(endpoint).delivered == 0  # nothing twice


def test_a_failing_endpoint_holds_the_next_event_and_gets_the_same_id_again(ns, receiver):
    endpoint = webhook_create(namespace=ns, url=receiver.url, actor="test")
    told(ns, "a = 1", "b = 2")
    receiver.answer(503)

    run = deliver(endpoint)

    assert run.outcome == "failed" and run.retry_in is not None and run.retry_in > 0
    assert len(receiver.all()) == 1  # event 2 waits for event 1's 2xx
    endpoint.refresh_from_db()
    assert endpoint.attempts == 1 and endpoint.failing_since is not None
    assert endpoint.next_attempt_at > timezone.now()
    assert deliver(endpoint).outcome == "not due"  # its backoff is stored, not slept
    assert endpoint.pk not in webhooks_due()

    receiver.answer(204)
    deliver_until_idle(endpoint)

    got = receiver.all()
    assert [r.event["key"] for r in got] == ["a", "a", "b"]
    assert got[0].webhook_id == got[1].webhook_id != got[2].webhook_id
    assert [r.event["key"] for r in receiver.delivered()] == ["a", "b"]
    endpoint.refresh_from_db()
    assert endpoint.attempts == 0 and endpoint.failing_since is None
    outcomes = list(WebhookDelivery.objects.filter(endpoint=endpoint).order_by("id")
                    .values_list("outcome", "status_code"))
    assert outcomes == [("failed", 503), ("delivered", 204), ("delivered", 204)]


def test_a_timeout_is_a_failure_and_a_redirect_is_not_followed(ns, receiver):
    endpoint = webhook_create(namespace=ns, url=receiver.url, actor="test")
    told(ns, "a = 1")
    receiver.delay(3)  # past PMEM_WEBHOOK_TIMEOUT (1 s)
    assert deliver(endpoint).outcome == "timeout"
    receiver.delay(0)
    receiver.answer(302)
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(next_attempt_at=None)
    assert deliver(endpoint).outcome == "failed"
    endpoint.refresh_from_db()
    assert endpoint.attempts == 2 and endpoint.last_error == "HTTP 302"
    assert list(WebhookDelivery.objects.filter(endpoint=endpoint).order_by("id")
                .values_list("outcome", flat=True)) == ["timeout", "failed"]


def test_failing_for_the_pause_time_pauses_until_resumed(ns, receiver, settings):
    settings.PMEM_WEBHOOK_PAUSE_AFTER = 3600
    endpoint = webhook_create(namespace=ns, url=receiver.url, actor="test")
    told(ns, "a = 1")
    receiver.answer(500)
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
        failing_since=timezone.now() - timedelta(hours=2), attempts=30)

    assert deliver(endpoint).outcome == "failed"

    endpoint.refresh_from_db()
    assert not endpoint.active
    assert endpoint.pk not in webhooks_due()
    receiver.answer(204)
    assert deliver(endpoint).outcome == "not due"
    webhook_resume(endpoint=endpoint, actor="test")
    deliver_until_idle(endpoint)
    assert [r.event["key"] for r in receiver.delivered()] == ["a"]


def test_an_erase_removes_the_keys_events_and_delivers_its_own(ns, receiver):
    endpoint = webhook_create(namespace=ns, url=receiver.url, actor="test")
    told(ns, "secret_code = 4471", "city = Paris")
    cell_erase(namespace=ns, key="secret_code", actor="user:t")

    deliver_until_idle(endpoint)

    events = receiver.verified(endpoint.secret)
    assert [(e["op"], e["key"]) for e in events] == [("accept", "city"), ("erase", "secret_code")]
    assert not any(b"4471" in r.body for r in receiver.all())


def test_the_ops_filter_passes_over_other_events(ns, receiver):
    endpoint = webhook_create(namespace=ns, url=receiver.url, actor="test", ops=["erase"])
    told(ns, "a = 1", "b = 2")
    assert deliver(endpoint).outcome == "idle"
    assert receiver.all() == []
    endpoint.refresh_from_db()
    assert endpoint.pk not in webhooks_due()  # passed over, not pending forever
    cell_erase(namespace=ns, key="a", actor="user:t")
    deliver_until_idle(endpoint)
    assert [(e["op"], e["key"]) for e in receiver.verified(endpoint.secret)] == [("erase", "a")]


def test_a_second_deliverer_of_the_same_endpoint_is_refused(ns, receiver):
    endpoint = webhook_create(namespace=ns, url=receiver.url, actor="test")
    from django.db import connections

    other = connections.create_connection("default")
    try:
        with webhook_claim(endpoint.pk) as held:
            assert held
            with other.cursor() as cur:
                cur.execute("SELECT pg_try_advisory_lock(%s, %s)", [0x5057, endpoint.pk])
                assert cur.fetchone()[0] is False
        with other.cursor() as cur:
            cur.execute("SELECT pg_try_advisory_lock(%s, %s)", [0x5057, endpoint.pk])
            assert cur.fetchone()[0] is True
    finally:
        other.close()


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/x", "http://[::1]/", "http://10.0.0.5/",
                                 "http://169.254.169.254/latest/meta-data/", "ftp://example.com/",
                                 "http://localhost/"])
def test_private_targets_are_refused_without_the_setting(ns, settings, url):
    settings.PMEM_WEBHOOK_ALLOW_PRIVATE = False
    with pytest.raises(TargetRefused):
        webhook_create(namespace=ns, url=url, actor="test")
    assert not WebhookEndpoint.objects.filter(namespace=ns).exists()


def test_a_target_that_became_private_is_refused_at_delivery(ns, receiver, settings):
    endpoint = webhook_create(namespace=ns, url=receiver.url, actor="test")
    told(ns, "a = 1")
    settings.PMEM_WEBHOOK_ALLOW_PRIVATE = False
    assert deliver(endpoint).outcome == "refused"
    assert receiver.all() == []


def test_deleting_the_namespace_deletes_its_webhooks(ns, receiver):
    endpoint = webhook_create(namespace=ns, url=receiver.url, actor="test")
    told(ns, "a = 1")
    namespace_delete(namespace=ns, actor="test")
    assert not WebhookEndpoint.objects.filter(pk=endpoint.pk).exists()
    assert receiver.all() == []


def test_the_command_creates_lists_resumes_and_deletes(ns, receiver):
    out = StringIO()
    call_command("pmem_webhook", "create", ns.name, "--url", receiver.url, "--ops",
                 "accept,erase", stdout=out)
    made = json.loads(out.getvalue())
    assert set(made) == {"id", "namespace", "url", "secret"}
    assert made["secret"].startswith("whsec_") and made["namespace"] == ns.name
    out = StringIO()
    call_command("pmem_webhook", "list", ns.name, stdout=out)
    (row,) = [json.loads(line) for line in out.getvalue().splitlines()]
    assert row["id"] == made["id"] and row["ops"] == ["accept", "erase"]
    assert "secret" not in row
    call_command("pmem_webhook", "resume", str(made["id"]), stdout=StringIO())
    call_command("pmem_webhook", "delete", str(made["id"]), stdout=StringIO())
    assert not WebhookEndpoint.objects.filter(pk=made["id"]).exists()
    with pytest.raises(CommandError, match="no webhook"):
        call_command("pmem_webhook", "delete", str(made["id"]), stdout=StringIO())
    with pytest.raises(CommandError, match="--ops"):
        call_command("pmem_webhook", "create", ns.name, "--url", receiver.url, "--ops", "nope",
                     stdout=StringIO())


def test_a_delivered_event_is_the_feeds_event(ns, receiver):
    from memory.selectors.changes import events_after

    endpoint = webhook_create(namespace=ns, url=receiver.url, actor="test")
    observations_ingest(namespace=ns, observations=[
        {"text": "city = Paris", "source": "crm"}, {"text": "city = Rome"}])
    cell_erase(namespace=ns, key="city", actor="user:t")
    told(ns, "team = red")
    deliver_until_idle(endpoint)

    feed = events_after(ns.pk, 0, 100)
    sent = [{k: v for k, v in e.items() if k != "namespace"}
            for e in receiver.verified(endpoint.secret)]
    assert sent == feed


def test_the_oldest_undelivered_events_age_is_a_gauge(ns, receiver):
    from pmem_site.metrics import exposition

    def gauge() -> float:
        for line in exposition().decode().splitlines():
            if line.startswith("pmem_webhook_oldest_undelivered_seconds "):
                return float(line.split()[1])
        raise AssertionError("no gauge")

    endpoint = webhook_create(namespace=ns, url=receiver.url, actor="test")
    assert gauge() == 0.0
    told(ns, "a = 1")
    time.sleep(1.1)
    assert gauge() >= 1.0
    deliver(endpoint)
    assert gauge() == 0.0


def test_the_delivery_log_keeps_the_last_attempts_of_each_endpoint(ns, receiver, settings):
    from memory.services.webhooks import webhook_log_prune

    settings.PMEM_WEBHOOK_LOG_KEEP = 3
    endpoint = webhook_create(namespace=ns, url=receiver.url, actor="test")
    told(ns, *(f"k{i} = v{i}" for i in range(5)))
    deliver(endpoint)
    assert WebhookDelivery.objects.filter(endpoint=endpoint).count() == 5
    assert webhook_log_prune() >= 2
    kept = list(WebhookDelivery.objects.filter(endpoint=endpoint).order_by("cursor")
                .values_list("cursor", flat=True))
    assert kept == sorted(kept)[-3:] and len(kept) == 3
    endpoint.refresh_from_db()
    assert kept[-1] == endpoint.delivered
