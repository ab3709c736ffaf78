"""Time limits and fairness through real Celery workers: an observation whose processing runs
past the soft or the hard time limit fails with the reason (not lost, not retried forever) and
its namespace moves on; hostile text in more namespaces than there are worker processes does
not hold a fourth namespace's observation back.

The slow path is real: the scripted model server answering late over HTTP (with the model
client's own timeout longer than the limit), and the probe's bait lines for the rule extractor.
"""

from __future__ import annotations

import pytest
from django.conf import settings

from memory.models import Evidence
from tests.support.scripted_llm import Fault, ScriptedLLM
from tests.support.worker import wait_settled, wait_until
from tests.tasks.helpers import (
    assert_memory_consistent,
    forget_sent,
    heads,
    reload,
    submit,
    told,
)

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

#: The model answers the first extraction after this long; the client would wait for it.
SLOW_ANSWER_S = 60.0
#: Limits short for a test, long enough for a first task on a busy machine (it sets up its
#: model client, a second or more) so that only the slow answer runs past them.
SOFT, HARD = "8", "12"
#: One pool process (so the warm-up below warms the one that runs the slow observation), and
#: a model client that waits longer than any limit here.
WORKER = {"concurrency": 1, "PMEM_LLM_TIMEOUT": "90", "PMEM_LLM_MAX_RETRIES": "0"}


def _slow_then_normal(srv: ScriptedLLM, worker, warm_ns, ns) -> tuple[Evidence, Evidence]:
    """One observation whose extraction the model answers late, then one in the same
    namespace (after the first, in seq) that it answers at once. A first observation in
    another namespace warms the pool process up (its first model call costs a second or two
    of setting up, which would count against the short limits of these tests)."""
    [warm] = submit(warm_ns, told("warm = up"))
    assert wait_settled([warm.pk], timeout=30, worker=worker) == {warm.pk: "committed"}
    srv.push(Fault.TIMEOUT(SLOW_ANSWER_S), job="extraction")
    [slow] = submit(ns, told("colour = red"))
    wait_until(lambda: srv.counts["extraction"] >= 2, 30, message="the slow extraction")
    [normal] = submit(ns, told("size = large"))
    return slow, normal


def test_soft_limit_fails_the_slow_observation_with_its_reason_and_the_namespace_moves_on(
        celery_worker_proc, make_namespace, ns):
    with ScriptedLLM() as srv:
        worker = celery_worker_proc(llm=srv, PMEM_TASK_SOFT_TIME_LIMIT=SOFT,
                                    PMEM_TASK_TIME_LIMIT="40", **WORKER)
        slow, normal = _slow_then_normal(srv, worker, make_namespace("warm"), ns)
        states = wait_settled([slow.pk, normal.pk], timeout=40, worker=worker)
        assert states == {slow.pk: "failed", normal.pk: "committed"}
        slow = reload(slow)
        assert slow.error.startswith("time limit") and "PMEM_TASK_SOFT_TIME_LIMIT" in slow.error
        assert heads(ns) == {"size": "large"}
        wait_until(lambda: "drain_namespace[" in worker.log_text(), 20,
                   message="the namespace's hand-over")
        assert srv.counts["extraction"] == 3  # the slow one was asked once: never retried
        assert reload(slow).state == "failed"
        assert_memory_consistent(ns)
    forget_sent()


def test_soft_limit_in_the_commit_fails_the_observation_being_committed(
        celery_worker_proc, make_namespace, ns):
    """The limit strikes while the drain commits (the annotator answers late): that
    observation fails with the reason, the next one commits."""
    with ScriptedLLM() as srv:
        worker = celery_worker_proc(llm=srv, PMEM_TASK_SOFT_TIME_LIMIT=SOFT,
                                    PMEM_TASK_TIME_LIMIT="40", **WORKER)
        [warm] = submit(make_namespace("warm"), told("warm = up"))
        assert wait_settled([warm.pk], timeout=30, worker=worker) == {warm.pk: "committed"}
        # The keys exist first: a fact on a key without a head is a create, decided without
        # asking the annotator (SPEC §5.4), and this test needs the annotator asked.
        seeded = submit(ns, told("colour = blue\nsize = small"))
        assert set(wait_settled([e.pk for e in seeded], timeout=30, worker=worker).values()) \
            == {"committed"}
        asked = srv.counts["annotation"]
        srv.push(Fault.TIMEOUT(SLOW_ANSWER_S), job="annotation")
        [slow] = submit(ns, told("colour = red"))
        wait_until(lambda: srv.counts["annotation"] >= asked + 1, 30,
                   message="the slow annotation")
        [normal] = submit(ns, told("size = large"))
        states = wait_settled([slow.pk, normal.pk], timeout=40, worker=worker)
        assert states == {slow.pk: "failed", normal.pk: "committed"}
        assert reload(slow).error.startswith("time limit: preparing or committing it took")
        assert heads(ns) == {"colour": "blue", "size": "large"}
        assert srv.counts["annotation"] == asked + 2  # the slow one asked once: never retried
        assert_memory_consistent(ns)
    forget_sent()


def test_hard_limit_kills_the_process_and_the_worker_fails_the_observation(
        celery_worker_proc, make_namespace, ns):
    with ScriptedLLM() as srv:
        # No soft limit: the hard one alone (long enough for the fresh pool process that
        # replaces the killed one to commit the next observation).
        worker = celery_worker_proc(llm=srv, PMEM_TASK_SOFT_TIME_LIMIT="0",
                                    PMEM_TASK_TIME_LIMIT=HARD, **WORKER)
        slow, normal = _slow_then_normal(srv, worker, make_namespace("warm"), ns)
        states = wait_settled([slow.pk, normal.pk], timeout=40, worker=worker)
        assert states == {slow.pk: "failed", normal.pk: "committed"}
        slow = reload(slow)
        assert slow.error.startswith("time limit") and "PMEM_TASK_TIME_LIMIT" in slow.error
        assert f"Hard time limit ({HARD}" in worker.log_text()
        assert heads(ns) == {"size": "large"}
        # the worker's main process handed the namespace to a fresh task
        wait_until(lambda: "drain_namespace[" in worker.log_text(), 30,
                   message="the namespace's hand-over")
        assert srv.counts["extraction"] == 3
        assert reload(slow).state == "failed"
        assert worker.alive  # the pool replaced its killed process; the worker goes on
        assert_memory_consistent(ns)
    forget_sent()


def test_every_task_runs_under_both_limits_of_the_worker_that_runs_it():
    from memory.tasks import TimeLimitedTask
    from pmem_site.celery import app

    assert app.conf.task_soft_time_limit == settings.CELERY_TASK_SOFT_TIME_LIMIT == 240.0
    assert app.conf.task_time_limit == settings.CELERY_TASK_TIME_LIMIT == 280.0
    ours = [t for name, t in app.tasks.items() if name.startswith("memory.")]
    assert {t.name.rsplit(".", 1)[1] for t in ours} == {
        "process_observation", "drain_namespace", "flush_frontiers", "sweep_unsettled",
        "finish_erasures", "expire_facts", "finish_namespace_deletions",
        "blank_erased_change_keys"}
    for task in ours:
        assert isinstance(task, TimeLimitedTask), task.name
        assert (task.soft_time_limit, task.time_limit) == (240.0, 280.0), task.name
    # (The worker tests above run a worker with other limits than this process's: those apply.)


# --- fairness ---------------------------------------------------------------------------------

MAX_TEXT = 100_000
BAITS = [
    # the probe's bait lines, grown to the text limit (cubic and quadratic in Python's re)
    "Update: " + "x has been moved from " * 3000 + " y to " * 3000 + ". x",
    "a" + " " * (MAX_TEXT - 2) + "b",
    "Report: " + "x is in " * 12000 + ". x",
]


def test_bait_in_three_namespaces_does_not_hold_a_fourth_namespaces_observation(
        celery_worker_proc, make_namespace):
    worker = celery_worker_proc(concurrency=2)  # fewer processes than bait namespaces
    baits = [submit(make_namespace("bait"), text)[0] for text in BAITS]
    victim_ns = make_namespace("victim")
    [victim] = submit(victim_ns, "city = Paris")
    # Promptly: a generous bound for a commit of milliseconds (before: minutes to hours).
    assert wait_settled([victim.pk], timeout=20, worker=worker) == {victim.pk: "committed"}
    assert heads(victim_ns) == {"city": "Paris"}
    try:
        states = wait_settled([e.pk for e in baits], timeout=60, worker=worker)
        # A bait either commits or, yielding more facts than any client may send, fails
        # whole by the fact cap: settled, never stuck.
        assert set(states.values()) <= {"committed", "failed"}, states
        for evidence in Evidence.objects.filter(pk__in=[e.pk for e in baits], state="failed"):
            assert "facts found" in evidence.error, evidence.error
    finally:
        forget_sent()  # a failure here must not leave the next test waiting for these tasks
