"""A worker SIGKILLed inside a commit drain: after a restart every observation is committed
exactly once — by the broker's redelivery, and by the sweep of unsettled observations that a
starting worker runs even when the broker lost every message."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import redis

from memory.models import Evidence, Operation
from tests.support.worker import reset_server, wait_until
from tests.tasks.helpers import (
    assert_memory_consistent,
    forget_sent,
    heads,
    ops_of,
    settle,
    submit,
    told,
)

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

SEED = told("mug_location = place 0\nstep = 0")
TEXTS = [told(f"mug_location = place {i}\nstep = {i}") for i in (1, 2, 3)]


def _kill_inside_the_drain(worker, server, ns):
    """Submit three observations, wait until the worker is inside the drain (its annotation
    request is being answered, slowly), then SIGKILL the whole worker. A first observation
    gives the keys heads, so the three are annotated (a new key's create is not, SPEC §5.4)."""
    assert settle(submit(ns, SEED), worker) == ["committed"]
    server.delay("annotation", 30)
    evidence = submit(ns, *TEXTS)
    wait_until(lambda: server.counts["annotation"] >= 1, timeout=20,
               message="the worker to reach annotation")
    worker.kill_hard()
    forget_sent()  # their ids may never finish: the sweep sends new ones
    states = dict(Evidence.objects.filter(namespace=ns).values_list("seq", "state"))
    assert states[2] == "processing"  # extracted, not committed: the kill hit the drain
    assert not Operation.objects.filter(evidence__in=evidence).exists()
    server.delay("annotation", 0)
    return evidence


def _assert_each_committed_once(evidence, worker, ns):
    assert settle(evidence, worker, timeout=60) == ["committed"] * 3
    assert [len(ops_of(e)) for e in evidence] == [2, 2, 2]
    assert heads(ns) == {"mug_location": "place 3", "step": "3"}
    seqs = list(Operation.objects.filter(evidence__in=evidence).order_by("id")
                .values_list("seq", flat=True))
    assert seqs == [2, 2, 3, 3, 4, 4]
    assert_memory_consistent(ns)


def test_worker_killed_mid_drain_recovers_after_restart(celery_worker_proc, llm_server, ns):
    reset_server(llm_server)
    worker = celery_worker_proc(llm=llm_server, concurrency=2, PMEM_VISIBILITY_TIMEOUT="3")
    evidence = _kill_inside_the_drain(worker, llm_server, ns)
    worker.restart()
    _assert_each_committed_once(evidence, worker, ns)


def _drop_every_message_of(queue: str) -> int:
    """Delete the queue's ready messages and the unacknowledged ones Redis keeps for it, as a
    broker that lost its data would: only the sweep can find the observations now."""
    sock = Path(os.environ["PMEM_DATA_DIR"]).resolve() / "redis.sock"
    client = redis.Redis(unix_socket_path=str(sock))
    dropped = client.llen(queue)
    client.delete(queue)
    for tag, payload in client.hgetall("unacked").items():
        _message, _exchange, routing_key = json.loads(payload)
        if routing_key == queue:
            client.hdel("unacked", tag)
            client.zrem("unacked_index", tag)
            dropped += 1
    return dropped


def test_sweep_on_worker_start_recovers_observations_the_broker_lost(celery_worker_proc,
                                                                      llm_server, ns):
    reset_server(llm_server)
    # A long visibility timeout: nothing would come back from the broker within the test.
    worker = celery_worker_proc(llm=llm_server, concurrency=1, PMEM_VISIBILITY_TIMEOUT="3600")
    evidence = _kill_inside_the_drain(worker, llm_server, ns)
    assert _drop_every_message_of(worker.queue) >= 1
    worker.restart()
    _assert_each_committed_once(evidence, worker, ns)
    restarted = worker.log_text().rsplit("===== start 2 =====", 1)[1]
    assert re.search(r"sweep_unsettled\[[^]]+\] succeeded in [^:]+: 3\b", restarted)
    assert restarted.count("process_observation") >= 3
