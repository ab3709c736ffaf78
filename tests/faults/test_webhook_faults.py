"""Webhook deliveries under faults (SPEC §12): writers POST observations over HTTP to a real
gunicorn, a real Celery worker with beat commits them and delivers their change events to a
real HTTP receiver on 127.0.0.1, and one thing fails mid-stream — the receiver (errors, then
timeouts, then back), the worker (SIGKILLed in the middle of a delivery), Redis (restarted
empty), PostgreSQL (SIGKILLed and restarted). Whatever happened: every committed event is
delivered, each webhook id's first delivery comes in cursor order, and any other delivery of
an id is a redelivery of the same body."""

from __future__ import annotations

import json
import signal
import time
import uuid
from collections.abc import Callable

import psycopg
import pytest

from tests.support.stack import Writers, manage, wait_for, wait_settled
from tests.support.webhook_receiver import WebhookReceiver

from .conftest import Stack

pytestmark = [pytest.mark.faults]

TOTAL = 60
DELIVERED_S = 60.0


@pytest.fixture
def with_model() -> bool:
    return False  # deliveries do not depend on the model: the no-model stack only


@pytest.fixture
def stack_env() -> dict[str, str]:
    return {"PMEM_WEBHOOK_ALLOW_PRIVATE": "1", "PMEM_WEBHOOK_RETRY_BASE": "0.3",
            "PMEM_WEBHOOK_RETRY_CAP": "2", "PMEM_WEBHOOK_TIMEOUT": "2",
            "PMEM_WEBHOOK_CONNECT_TIMEOUT": "1", "PMEM_WEBHOOK_EVERY": "1"}


def _cursors(dsn: str, namespace: str) -> list[int]:
    with psycopg.connect(dsn, connect_timeout=3) as conn:
        return [row[0] for row in conn.execute(
            "SELECT e.cursor FROM memory_changeevent e JOIN memory_namespace n"
            " ON n.id = e.namespace_id WHERE n.name = %s ORDER BY e.cursor",
            [namespace]).fetchall()]


def run(stack: Stack, scenario: str, strike: Callable[[Stack, WebhookReceiver], None]) -> None:
    namespace = f"hook-{scenario}-{uuid.uuid4().hex[:6]}"
    token = stack.namespace(namespace)
    with WebhookReceiver() as receiver:
        made = json.loads(manage(stack.env, "pmem_webhook", "create", namespace, "--url",
                                 receiver.url).strip().splitlines()[-1])
        writers = Writers(stack.url, namespace, token, total=TOTAL, pause=0.05).start()
        wait_for(lambda: len(receiver.first_seen()) >= 10, 60, "ten deliveries")
        strike(stack, receiver)
        writers.join(timeout=120)
        assert writers.acknowledged == TOTAL, (writers.statuses, writers.errors)
        wait_settled(stack.dsn, namespace, writers.acks, timeout=60)
        cursors = _cursors(stack.dsn, namespace)
        assert len(cursors) >= 2 * TOTAL  # two facts an observation

        try:
            wait_for(lambda: len(receiver.first_seen()) >= len(cursors), DELIVERED_S,
                     f"{len(cursors)} events delivered")
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {len(receiver.first_seen())} delivered\n"
                                 f"{stack.logs()}") from None

        first = receiver.first_seen()
        assert [r.event["cursor"] for r in first] == cursors  # nothing lost, order kept
        bodies: dict[str, bytes] = {}
        for r in receiver.all():  # every other request: a redelivery, same id, same body
            assert bodies.setdefault(r.webhook_id, r.body) == r.body
        receiver.verified(made["secret"])
        print(f"{scenario}: {len(cursors)} events, {len(receiver.all())} requests, "
              f"{len(receiver.delivered()) - len(first)} redelivered after a 2xx")


def _endpoint_fails_times_out_and_returns(stack: Stack, receiver: WebhookReceiver) -> None:
    receiver.answer(500)
    wait_for(lambda: sum(r.status == 500 for r in receiver.all()) >= 3, 30, "failures")
    receiver.answer(204)
    receiver.delay(3)  # past PMEM_WEBHOOK_TIMEOUT
    before = len(receiver.all())
    wait_for(lambda: len(receiver.all()) >= before + 2, 30, "timeouts")
    receiver.delay(0)


def test_an_endpoint_that_fails_times_out_and_comes_back(stack: Stack) -> None:
    run(stack, "endpoint", _endpoint_fails_times_out_and_returns)


def _worker_killed_mid_delivery(stack: Stack, receiver: WebhookReceiver) -> None:
    receiver.delay(1.5)  # under the timeout: the kill finds a delivery in flight
    arrived = receiver.arrived
    wait_for(lambda: receiver.arrived > arrived, 30, "a delivery in flight")
    stack.worker.signal(signal.SIGKILL)
    assert stack.worker.proc is not None
    stack.worker.proc.wait(timeout=30)
    receiver.delay(0)
    stack.worker = stack.new_worker("w2")


def test_a_worker_killed_mid_delivery(stack: Stack) -> None:
    run(stack, "worker", _worker_killed_mid_delivery)


def _broker_restarted_empty(stack: Stack, receiver: WebhookReceiver) -> None:
    stack.redis.kill()
    time.sleep(1.5)
    stack.redis.start()


def test_the_broker_restarted_empty(stack: Stack) -> None:
    run(stack, "broker", _broker_restarted_empty)


def _database_killed(stack: Stack, receiver: WebhookReceiver) -> None:
    stack.cluster.pg.kill()
    time.sleep(3)
    stack.cluster.pg.start()


def test_the_database_sigkilled_and_restarted(stack: Stack) -> None:
    run(stack, "database", _database_killed)
