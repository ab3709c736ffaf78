"""Webhook deliveries by real Celery workers to a real HTTP receiver on 127.0.0.1: a commit
wakes them; a worker SIGKILLed in the middle of a delivery loses nothing — after a restart the
event cut off is delivered again with the same webhook-id and the rest follow, in order."""

from __future__ import annotations

import pytest

from memory.services import observations_ingest
from memory.services.webhooks import webhook_create
from tests.support.webhook_receiver import WebhookReceiver
from tests.support.worker import wait_until

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

WEBHOOK_ENV = {"PMEM_WEBHOOK_ALLOW_PRIVATE": "1", "PMEM_WEBHOOK_RETRY_BASE": "0.2",
               "PMEM_WEBHOOK_RETRY_CAP": "1", "PMEM_WEBHOOK_TIMEOUT": "60"}


@pytest.fixture(autouse=True)
def _private_targets(settings):
    settings.PMEM_WEBHOOK_ALLOW_PRIVATE = True


def told(ns, *lines: str) -> None:
    observations_ingest(namespace=ns, observations=[{"text": line} for line in lines])


def _keys_in_order(receiver: WebhookReceiver) -> list[str]:
    return [r.event["key"] for r in receiver.first_seen()]


def _assert_redeliveries_only(receiver: WebhookReceiver) -> None:
    """Every request is one event's, and two requests with one webhook-id carry one body."""
    bodies: dict[str, bytes] = {}
    for r in receiver.all():
        assert bodies.setdefault(r.webhook_id, r.body) == r.body
    cursors = [r.event["cursor"] for r in receiver.first_seen()]
    assert cursors == sorted(cursors)


def test_a_commit_wakes_the_delivery_at_once(ns, celery_worker_proc):
    celery_worker_proc(**WEBHOOK_ENV)
    with WebhookReceiver() as receiver:
        endpoint = webhook_create(namespace=ns, url=receiver.url, actor="test")
        told(ns, *(f"k{i} = v{i}" for i in range(6)))  # no beat runs here: only the wake-up

        wait_until(lambda: len(receiver.first_seen()) == 6, timeout=60,
                   message="six deliveries")

        assert _keys_in_order(receiver) == [f"k{i}" for i in range(6)]
        receiver.verified(endpoint.secret)
        _assert_redeliveries_only(receiver)


def test_a_failing_endpoint_is_retried_by_the_worker_until_it_answers(ns, celery_worker_proc):
    celery_worker_proc(**WEBHOOK_ENV)
    with WebhookReceiver() as receiver:
        receiver.answer(500)
        webhook_create(namespace=ns, url=receiver.url, actor="test")
        told(ns, "a = 1", "b = 2", "c = 3")
        wait_until(lambda: len(receiver.all()) >= 3, timeout=60, message="three failures")
        assert {r.event["key"] for r in receiver.all()} == {"a"}  # b waits for a's 2xx

        receiver.answer(204)

        wait_until(lambda: len(receiver.first_seen()) == 3, timeout=60, message="recovery")
        assert _keys_in_order(receiver) == ["a", "b", "c"]
        _assert_redeliveries_only(receiver)


def test_a_worker_killed_mid_delivery_loses_nothing(ns, celery_worker_proc):
    worker = celery_worker_proc(**WEBHOOK_ENV)
    with WebhookReceiver() as receiver:
        receiver.delay(30)  # the first delivery hangs: the kill hits it in flight
        webhook_create(namespace=ns, url=receiver.url, actor="test")
        told(ns, "a = 1", "b = 2", "c = 3")
        wait_until(lambda: receiver.arrived >= 1, timeout=60, message="a delivery in flight")

        worker.kill_hard()
        receiver.delay(0)
        worker.start()  # its start-up queues every due webhook

        wait_until(lambda: len({r.event["key"] for r in receiver.delivered()}) == 3,
                   timeout=90, message="every event after the restart")
        assert _keys_in_order(receiver) == ["a", "b", "c"]
        ids = [r.webhook_id for r in receiver.delivered() if r.event["key"] == "a"]
        assert len(set(ids)) == 1  # a redelivery carries the same id
        _assert_redeliveries_only(receiver)


def test_an_erase_wakes_the_delivery_of_its_erase_event(ns, celery_worker_proc):
    """Without beat: the erase event goes out on the erase's own wake-up, as a commit's does
    (a subscriber erases its copy now, not at beat's next round)."""
    from memory.services import cell_erase

    celery_worker_proc(**WEBHOOK_ENV)
    with WebhookReceiver() as receiver:
        endpoint = webhook_create(namespace=ns, url=receiver.url, actor="test")
        told(ns, "a = 1", "b = 2")
        wait_until(lambda: len(receiver.first_seen()) == 2, timeout=60, message="two deliveries")

        cell_erase(namespace=ns, key="a", actor="test")

        wait_until(lambda: len(receiver.first_seen()) == 3, timeout=30,
                   message="the erase event's delivery")
        erase = receiver.first_seen()[-1].event
        assert (erase["op"], erase["key"]) == ("erase", "a")
        receiver.verified(endpoint.secret)
        _assert_redeliveries_only(receiver)
