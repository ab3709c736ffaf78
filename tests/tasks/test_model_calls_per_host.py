"""``PMEM_MODEL_CONCURRENCY`` caps the model calls in flight of a worker host, whatever
``PMEM_WORKERS`` is: two prefork processes draining two namespaces share one cap; and one
process keeps that many in flight for several namespaces, not for one at a time."""

from __future__ import annotations

import pytest

from tests.support.worker import reset_server
from tests.tasks.helpers import assert_memory_consistent, heads, settle, submit, told

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_two_worker_processes_keep_the_hosts_cap(celery_worker_proc, llm_server,
                                                 make_namespace):
    reset_server(llm_server)
    llm_server.delay("extraction", 0.4)  # long enough for both processes' drains to overlap
    llm_server.gather("extraction", 2)  # and a busy machine's first two calls do overlap
    worker = celery_worker_proc(llm=llm_server, concurrency=2, PMEM_MODEL_CONCURRENCY="2")
    spaces = [make_namespace(), make_namespace()]
    evidence = []
    for i in range(4):
        for n, space in enumerate(spaces):
            evidence += submit(space, told(f"item{i}x{n} place = shelf {i}"))

    assert set(settle(evidence, worker, timeout=90)) == {"committed"}
    # Each process alone could keep 2 in flight (its drain prepares 2 ahead): together, 2.
    assert llm_server.max_in_flight == 2
    for n, space in enumerate(spaces):
        assert heads(space) == {f"item{i}x{n}_place": f"shelf {i}" for i in range(4)}
        assert_memory_consistent(space)


def test_idle_threads_extract_other_namespaces_observations(celery_worker_proc, llm_server,
                                                           make_namespace):
    """One worker process runs one task at a time. While the first namespace's single
    observation is extracted, the threads it leaves idle take the second namespace's three
    (its drain, adopted, or their extraction): four calls in flight (one namespace at a time
    would reach three), and each observation is still extracted exactly once."""
    reset_server(llm_server)
    # Each extraction is answered once four are in flight (or after 30 s): a busy machine
    # may take its time to start the rest, and one namespace at a time never gets there.
    llm_server.gather("extraction", 4)
    # A client timeout well past the gathering: a call cut off and retried would count twice.
    worker = celery_worker_proc(llm=llm_server, concurrency=1, PMEM_MODEL_CONCURRENCY="4",
                                PMEM_LLM_TIMEOUT="60")
    first, second = make_namespace(), make_namespace()
    evidence = submit(first, told("lamp state = on"))
    evidence += submit(second, *(told(f"box{i} place = shelf {i}") for i in range(3)))

    assert set(settle(evidence, worker, timeout=90)) == {"committed"}
    assert llm_server.max_in_flight == 4
    assert llm_server.counts["extraction"] == 4
    assert heads(first) == {"lamp_state": "on"}
    assert heads(second) == {f"box{i}_place": f"shelf {i}" for i in range(3)}
    assert_memory_consistent(second)


def test_one_worker_process_drains_namespaces_side_by_side(celery_worker_proc, llm_server,
                                                           make_namespace):
    """A worker process runs one task at a time, and a task drains one namespace. While the
    first namespace's update waits on its annotation, the threads its drain leaves idle
    drain the second namespace, which no drain holds: the two annotations are in flight
    together (one namespace at a time, one would follow the other)."""
    reset_server(llm_server)
    worker = celery_worker_proc(llm=llm_server, concurrency=1, PMEM_MODEL_CONCURRENCY="4",
                                PMEM_LLM_TIMEOUT="60")
    first, second = make_namespace(), make_namespace()
    evidence = submit(first, told("lamp state = on")) + submit(second, told("door state = open"))
    assert set(settle(evidence, worker)) == {"committed"}
    reset_server(llm_server)
    llm_server.gather("annotation", 2)
    evidence = submit(first, told("lamp state = off")) + submit(second, told("door state = shut"))

    assert set(settle(evidence, worker, timeout=90)) == {"committed"}
    assert llm_server.max_in_flight_of("annotation") == 2
    assert llm_server.counts["annotation"] == 2 and llm_server.counts["extraction"] == 2
    assert heads(first) == {"lamp_state": "off"}
    assert heads(second) == {"door_state": "shut"}
    assert_memory_consistent(second)
