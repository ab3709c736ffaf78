"""Faults under a running service (docs/operations.md, "What the fault suite measured").

Each test runs four writers POSTing observations over HTTP to a real gunicorn, committed by a
real Celery worker with beat, against a PostgreSQL and a Redis of the test's own; strikes one
dependency mid-stream; heals it; and asserts what must hold whatever happened: every
acknowledged observation committed exactly once within 30 s of recovery, every head the value
of the last observation (by seq) that named its key, operations in seq order, and no answer
5xx other than 503 (which always carries Retry-After and a JSON error). Each runs without and
with a model (the scripted one over HTTP).
"""

from __future__ import annotations

import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from tests.support.stack import (
    Figures,
    Writers,
    check_exactly_once,
    wait_for,
    wait_settled,
)

from .conftest import FIGURES, Stack

pytestmark = [pytest.mark.faults]

RECOVERY_S = 30.0
TOTAL = 120


def run(stack: Stack, scenario: str, strike: Callable[[Stack, Writers], float], *,
        total: int = TOTAL, pause: float = 0.03) -> Figures:
    """Write ``total`` observations, ``strike`` once a third is acknowledged (it returns the
    moment the fault was healed), then check everything and record the figures."""
    namespace = f"{scenario}-{uuid.uuid4().hex[:6]}"
    writers = Writers(stack.url, namespace, stack.namespace(namespace), total=total,
                      pause=pause).start()
    wait_for(lambda: writers.acknowledged >= total // 3, 60, "a third acknowledged")
    healed = strike(stack, writers)
    writers.join(timeout=120)
    assert writers.acknowledged == total, (writers.statuses, writers.errors)
    from_recovery = max(healed, time.monotonic())
    try:
        wait_settled(stack.dsn, namespace, writers.acks, timeout=RECOVERY_S)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{stack.logs()}") from None
    settled_after = time.monotonic() - healed
    assert writers.server_errors == {}, writers.statuses
    check_exactly_once(stack.dsn, namespace, writers.acks)
    figures = Figures(scenario=scenario, model=stack.llm is not None,
                      acknowledged=writers.acknowledged, served_503=writers.statuses[503],
                      other_5xx=sum(writers.server_errors.values()),
                      settle_after_recovery_s=round(settled_after, 1))
    figures.write(FIGURES)
    assert time.monotonic() - from_recovery <= RECOVERY_S + 1
    return figures


# --- the broker -------------------------------------------------------------------------------


def _broker_restarted_empty(stack: Stack, writers: Writers) -> float:
    stack.redis.kill()
    time.sleep(1.5)
    stack.redis.start()  # same port, nothing kept: every queued message is gone
    return time.monotonic()


def test_broker_killed_and_restarted_empty(stack: Stack) -> None:
    figures = run(stack, "broker", _broker_restarted_empty)
    assert figures.other_5xx == 0


# --- the database -----------------------------------------------------------------------------


def _database_killed(stack: Stack, writers: Writers) -> float:
    before = writers.statuses[503]
    stack.cluster.pg.kill()
    wait_for(lambda: writers.statuses[503] > before, 20, "a 503 while the database is down")
    time.sleep(3)
    stack.cluster.pg.start()
    return time.monotonic()


def test_database_sigkilled_and_restarted(stack: Stack) -> None:
    figures = run(stack, "database", _database_killed)
    assert figures.served_503 > 0  # the outage was seen, and answered as one


# --- the model --------------------------------------------------------------------------------


def _model_down_30s(stack: Stack, writers: Writers) -> float:
    assert stack.llm is not None
    port = stack.llm.port
    stack.llm.close()
    time.sleep(30)
    stack.llm.start(port=port)
    return time.monotonic()


def test_model_server_down_30s_then_back(stack: Stack) -> None:
    if stack.llm is None:
        pytest.skip("without a model there is no model server to take down")
    run(stack, "model", _model_down_30s)


# --- a worker stopped in the middle of a commit -----------------------------------------------


def _worker_sigterm_mid_commit(stack: Stack, writers: Writers) -> float:
    """Hold a row lock on a cell the commits need, so that the worker's commit transaction
    waits inside itself; SIGTERM the worker's whole process group there (what systemd sends
    on stop); release the lock once it is gone; start another worker."""
    blocker = psycopg.connect(stack.dsn)
    try:
        wait_for(lambda: blocker.execute(
            "SELECT c.id FROM memory_cell c JOIN memory_namespace n ON n.id = c.namespace_id"
            " WHERE n.name LIKE 'worker-%%' AND c.key = 'k0' FOR UPDATE").fetchall(),
            30, "the cell k0")
        wait_for(lambda: _commit_waiting(stack.dsn), 30, "a commit waiting on the cell lock")
        stack.worker.signal(signal.SIGTERM)
        assert stack.worker.proc is not None
        stack.worker.proc.wait(timeout=30)
    finally:
        blocker.rollback()
        blocker.close()
    stack.new_worker("w2")
    return time.monotonic()


def _commit_waiting(dsn: str) -> bool:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                           " AND state = 'active'").fetchone()
    return bool(row and row[0])


def test_worker_sigtermed_mid_commit(stack: Stack) -> None:
    run(stack, "worker", _worker_sigterm_mid_commit)


# --- the database's disk full -----------------------------------------------------------------


def _fill(folder: Path) -> Path:
    filler = folder / "filler"
    subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=1M"], capture_output=True)
    return filler


def _disk_full(stack: Stack, writers: Writers) -> float:
    assert stack.cluster.tmpfs is not None
    before = writers.statuses[503]
    filler = _fill(stack.cluster.tmpfs)
    try:
        wait_for(lambda: writers.statuses[503] > before, 30, "a 503 while the disk is full")
        time.sleep(2)
    finally:
        filler.unlink()
    healed = time.monotonic()
    if not stack.cluster.pg.alive:  # a PANIC on WAL space: its supervisor starts it again
        stack.cluster.pg.start()
    return healed


def test_database_disk_full_then_space_returns(stack: Stack) -> None:
    if stack.cluster.tmpfs is None:
        pytest.skip("mounting a small tmpfs for the database needs root")
    # Slower writers: the disk fills (a few hundred MB of tmpfs) while they still write.
    figures = run(stack, "disk", _disk_full, total=200, pause=0.1)
    assert figures.served_503 > 0
