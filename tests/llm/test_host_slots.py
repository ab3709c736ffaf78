"""The cap on model calls in flight holds for every process of a host together
(``memory.llm.hostslots``), and a process that dies never keeps a slot."""

from __future__ import annotations

import contextvars
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from memory.llm.hostslots import URGENCY, HostSemaphore
from tests.llm.test_llm_client import extraction_call
from tests.support.scripted_llm import ScriptedLLM

_CHILD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from memory.llm.hostslots import URGENCY, HostSemaphore
    sem = HostSemaphore(Path(sys.argv[1]), int(sys.argv[2]))
    if sys.argv[3] == "try":
        print("taken" if sem.acquire(timeout=0.2) else "refused", flush=True)
    else:
        sem.acquire()
        print("held", flush=True)
        time.sleep(60)
""")


def _child(directory: Path, size: int, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", _CHILD, str(directory), str(size), mode],
                            stdout=subprocess.PIPE, text=True, cwd=os.getcwd())


def _attempt_in_another_process(directory: Path, size: int) -> str:
    child = _child(directory, size, "try")
    out, _ = child.communicate(timeout=30)
    return out.strip()


def test_slots_taken_here_are_taken_for_another_process(tmp_path: Path) -> None:
    sem = HostSemaphore(tmp_path, 2)
    sem.acquire()
    assert _attempt_in_another_process(tmp_path, 2) == "taken"
    sem.acquire()
    assert _attempt_in_another_process(tmp_path, 2) == "refused"
    sem.release()
    assert _attempt_in_another_process(tmp_path, 2) == "taken"
    sem.release()


def test_a_killed_holder_frees_its_slot(tmp_path: Path) -> None:
    child = _child(tmp_path, 1, "hold")
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        sem = HostSemaphore(tmp_path, 1)
        assert not sem.acquire(timeout=0.05)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
        assert sem.acquire(timeout=10)
        sem.release()
    finally:
        child.kill()
        child.wait(timeout=10)


def test_two_threads_of_one_process_never_share_a_slot(tmp_path: Path) -> None:
    sem = HostSemaphore(tmp_path, 2)
    taken = threading.Barrier(3)
    done = threading.Event()

    def hold() -> None:
        with sem:
            taken.wait(timeout=10)
            done.wait(timeout=10)

    holders = [threading.Thread(target=hold) for _ in range(2)]
    for thread in holders:
        thread.start()
    taken.wait(timeout=10)
    assert sem.holders_here() == 2
    assert not sem.acquire(timeout=0.1)  # a third thread waits, though no other process holds any
    done.set()
    for thread in holders:
        thread.join(timeout=10)
    assert sem.acquire(timeout=10)  # a release here wakes a waiter at once
    sem.release()


def test_a_release_by_a_thread_that_holds_nothing_is_refused(tmp_path: Path) -> None:
    sem = HostSemaphore(tmp_path, 1)
    try:
        sem.release()
    except ValueError:
        pass
    else:
        raise AssertionError("a release without an acquire was accepted")


def test_clients_in_two_processes_share_one_cap(make_client, scripted_llm: ScriptedLLM,
                                                 tmp_path: Path) -> None:
    """A forked process (a prefork worker's pool) and its parent, each with four threads
    calling through a client capped at 2 calls per host: never more than 2 at the server."""
    scripted_llm.delay("extraction", 0.3)
    client = make_client(concurrency=2, slots_root=tmp_path)

    def four_calls() -> None:
        threads = [threading.Thread(target=extraction_call, args=(client,)) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    pid = os.fork()
    if pid == 0:  # the child: calls, then leaves without running the parent's clean-ups
        try:
            four_calls()
        finally:
            os._exit(0)
    four_calls()
    _, status = os.waitpid(pid, 0)

    assert os.waitstatus_to_exitcode(status) == 0
    assert scripted_llm.counts["extraction"] == 8
    assert scripted_llm.max_in_flight == 2


def test_the_most_urgent_waiter_of_a_process_takes_the_next_slot(tmp_path: Path) -> None:
    sem = HostSemaphore(tmp_path, 1)
    sem.acquire()
    order: list[str] = []

    def wait_as(name: str, urgency: tuple[int, ...]) -> None:
        URGENCY.set(urgency)
        sem.acquire()
        order.append(name)
        sem.release()

    threads = []
    # They queue least urgent first, so first come first served would give the reverse.
    for name, urgency in (("ordinary-new", (1, 9)), ("ordinary-old", (1, 5)),
                          ("awaited", (0, 7))):
        thread = threading.Thread(target=contextvars.copy_context().run,
                                  args=(wait_as, name, urgency))
        thread.start()
        threads.append(thread)
        while len(sem._waiting) < len(threads):  # noqa: SLF001 - it has queued
            threading.Event().wait(0.01)
    sem.release()
    for thread in threads:
        thread.join(timeout=10)
    assert order == ["awaited", "ordinary-old", "ordinary-new"]
