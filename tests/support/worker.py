"""Real Celery worker processes for the task tests (STYLE.md: no eager mode, no fakes).

:class:`CeleryWorker` runs ``python -m celery -A pmem_site worker`` (prefork) as its own process
group, against the TEST database pytest-django created (``PMEM_TEST_DB_NAME``) and the embedded
PostgreSQL/Redis of the tests (same ``PMEM_DATA_DIR``), consuming one queue of its own so that
workers of other tests or sessions sharing the Redis never take its messages. The test process
must publish to that queue: :func:`routed_to` points the Celery app of the test process at it.

Fixtures (tests using them are ``@pytest.mark.django_db(transaction=True)``, so what the test
writes is committed and visible to the worker; ``@pytest.mark.worker``):

- ``celery_worker_proc``: a factory, ``celery_worker_proc(llm=srv, concurrency=2, **env)``,
  starting a worker for this test, routing the test process's tasks to it, and killing it
  (whole process group) before the test database is flushed.
- ``llm_server`` / ``llm_worker``: one scripted model server and one worker with it for the
  whole session (a worker takes seconds to start on a small machine); ``llm_worker`` resets the
  server's log, faults and delays for each test and restarts the worker if a test killed it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.scripted_llm import ScriptedLLM

ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 60.0

#: Test-speed settings for worker processes: short model timeouts, one client retry, fast
#: task retries, and a short Redis visibility timeout so a killed worker's message returns.
FAST_ENV = {
    "PMEM_LLM_TIMEOUT": "2",
    "PMEM_LLM_MAX_RETRIES": "1",
    "PMEM_TASK_MAX_RETRIES": "1",
    "PMEM_TASK_RETRY_BASE": "0.2",
    "PMEM_TASK_RETRY_CAP": "1",
    "PMEM_VISIBILITY_TIMEOUT": "10",
}


def llm_env(server: ScriptedLLM | None) -> dict[str, str]:
    """The ``PMEM_LLM_*``/``PMEM_EMBED_*`` variables pointing chat AND embeddings at
    ``server``, or blanking them (no model: rule extractor, local hashing embedder)."""
    url = server.base_url if server is not None else ""
    model = server.model if server is not None else ""
    return {"PMEM_LLM_BASE_URL": url, "PMEM_LLM_MODEL": model,
            "PMEM_EMBED_BASE_URL": url, "PMEM_EMBED_MODEL": model}


class CeleryWorker:
    """One ``celery worker`` process group. ``start()`` returns once it consumes its queue."""

    def __init__(self, *, db_name: str, queue: str | None = None, concurrency: int = 2,
                 env: dict[str, str] | None = None, log_dir: Path | None = None) -> None:
        self.db_name = db_name
        self.queue = queue or f"pmem-test-{uuid.uuid4().hex[:10]}"
        self.concurrency = concurrency
        self.env = {**FAST_ENV, **(env or {})}
        self.log_dir = log_dir or Path(os.environ["PMEM_DATA_DIR"]) / "worker-logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.log_path = self.log_dir / f"{self.queue}.log"

    # --- lifecycle ----------------------------------------------------------------------

    def command(self) -> list[str]:
        return [sys.executable, "-m", "celery", "-A", "pmem_site", "worker",
                "-Q", self.queue, "-n", f"{self.queue}@%h", "--pool", "prefork",
                "--concurrency", str(self.concurrency), "--loglevel", "INFO",
                "--without-gossip", "--without-mingle", "--without-heartbeat"]

    def start(self, timeout: float = READY_TIMEOUT_S) -> CeleryWorker:
        assert self.proc is None or self.proc.poll() is not None, "worker already running"
        env = {**os.environ, **self.env, "PMEM_TEST_DB_NAME": self.db_name,
               "PMEM_QUEUE": self.queue, "PMEM_DATA_DIR": os.environ["PMEM_DATA_DIR"],
               "PMEM_LOG_LEVEL": self.env.get("PMEM_LOG_LEVEL", "INFO"),
               "PYTHONUNBUFFERED": "1", "DJANGO_SETTINGS_MODULE": "pmem_site.settings"}
        self.starts += 1
        with self.log_path.open("ab") as log:
            log.write(f"\n===== start {self.starts} =====\n".encode())
            log.flush()
            self.proc = subprocess.Popen(self.command(), cwd=ROOT, env=env, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        self._wait_ready(timeout)
        return self

    def _wait_ready(self, timeout: float) -> None:
        marker = f"{self.queue}@"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise RuntimeError(f"celery worker exited during start:\n{self.log_tail()}")
            run = self.log_text().rsplit(f"===== start {self.starts} =====", 1)[-1]
            if any(marker in line and line.rstrip().endswith("ready.")
                   for line in run.splitlines()):
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"celery worker not ready after {timeout:.0f}s:\n{self.log_tail()}")

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def pids(self) -> list[int]:
        """The main process and its pool children."""
        if self.proc is None:
            return []
        out = subprocess.run(["pgrep", "-g", str(self.proc.pid)], capture_output=True,
                             text=True, check=False).stdout
        return sorted(int(p) for p in out.split())

    def kill_hard(self) -> None:
        """SIGKILL the main process and every child at once (a machine losing power, as far
        as the broker and PostgreSQL can tell): no task finishes, nothing is acknowledged."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self, timeout: float = 10.0) -> None:
        """A warm shutdown (SIGTERM), then SIGKILL for whatever is left of the group."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # pool children that outlived the main
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)

    def restart(self, timeout: float = READY_TIMEOUT_S) -> CeleryWorker:
        self.stop()
        return self.start(timeout)

    # --- logs ----------------------------------------------------------------------------

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])


# --- routing the test process's tasks --------------------------------------------------------

_AMQP_CACHES = ("default_queue", "queues", "router", "send_task_message", "default_exchange")


def _forget_routes(app: Any) -> None:
    # Celery caches the default queue, exchange and the sender that captured them the first
    # time a task is sent; drop them so a changed task_default_queue takes effect.
    for name in _AMQP_CACHES:
        app.amqp.__dict__.pop(name, None)


@contextlib.contextmanager
def routed_to(queue: str) -> Iterator[None]:
    """Send this process's tasks (``process_observation.delay``) to ``queue`` meanwhile."""
    from pmem_site.celery import app

    before = app.conf.task_default_queue
    app.conf.task_default_queue = queue
    _forget_routes(app)
    try:
        yield
    finally:
        app.conf.task_default_queue = before
        _forget_routes(app)


def wait_until(predicate: Callable[[], Any], timeout: float = 30.0, interval: float = 0.1,
               message: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message}")


def wait_settled(evidence_ids: Iterable[int], timeout: float = 30.0,
                 worker: CeleryWorker | None = None) -> dict[int, str]:
    """Poll until none of the observations is pending or processing; their states by id."""
    from memory.models import Evidence

    ids = list(evidence_ids)

    def settled() -> dict[int, str] | None:
        states = dict(Evidence.objects.filter(pk__in=ids).values_list("id", "state"))
        return None if any(s in ("pending", "processing") for s in states.values()) else states

    try:
        return wait_until(settled, timeout, message=f"observations {ids} to settle")
    except AssertionError as exc:
        tail = f"\n--- worker log ---\n{worker.log_tail()}" if worker is not None else ""
        raise AssertionError(f"{exc}: {dict(Evidence.objects.filter(pk__in=ids).values_list('id', 'state'))}{tail}") from None


# --- fixtures ------------------------------------------------------------------------------------


def _test_db_name() -> str:
    from django.db import connection

    return str(connection.settings_dict["NAME"])


@pytest.fixture
def celery_worker_proc(transactional_db: None) -> Iterator[Callable[..., CeleryWorker]]:
    """``start(llm=None, concurrency=2, **env) -> CeleryWorker``: a worker for this test
    only, with this process's tasks routed to it. Stopped (process group killed) before the
    test database is flushed."""
    started: list[CeleryWorker] = []
    routes = contextlib.ExitStack()

    def start(llm: ScriptedLLM | None = None, concurrency: int = 2,
              **env: str) -> CeleryWorker:
        worker = CeleryWorker(db_name=_test_db_name(), concurrency=concurrency,
                              env={**llm_env(llm), **env})
        started.append(worker)
        worker.start()
        routes.enter_context(routed_to(worker.queue))
        return worker

    try:
        yield start
    finally:
        routes.close()
        for worker in started:
            worker.stop()


@pytest.fixture(scope="session")
def llm_server() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as server:
        yield server


@pytest.fixture(scope="session")
def _session_llm_worker(django_db_setup: None, django_db_blocker: Any,
                        llm_server: ScriptedLLM) -> Iterator[CeleryWorker]:
    with django_db_blocker.unblock():
        worker = CeleryWorker(db_name=_test_db_name(), concurrency=2, env=llm_env(llm_server))
    worker.start()
    try:
        yield worker
    finally:
        worker.stop()


def reset_server(server: ScriptedLLM) -> None:
    """Forget the requests, queued faults and delays of a session-wide scripted server."""
    with server._lock:
        server.requests.clear()
        server.forms.clear()
        server._faults.clear()
        server._delays.clear()
        server._gathers.clear()
        server.max_in_flight = 0
        server._most.clear()
    server._released.clear()


@pytest.fixture
def llm_worker(transactional_db: None, _session_llm_worker: CeleryWorker,
               llm_server: ScriptedLLM, settings: Any) -> Iterator[CeleryWorker]:
    """The session's worker with the scripted model (``llm_server``), for this test: server
    state reset, this process's tasks routed to it, and this process's settings pointing at
    the same model (for code a test runs in-process)."""
    from memory.llm.embedding import reset_embedder_cache

    reset_server(llm_server)
    if not _session_llm_worker.alive:
        _session_llm_worker.start()
    for name, value in {**llm_env(llm_server), **FAST_ENV}.items():
        if name.startswith("PMEM_LLM") or name.startswith("PMEM_EMBED"):
            setattr(settings, name, float(value) if name == "PMEM_LLM_TIMEOUT" else
                    int(value) if name == "PMEM_LLM_MAX_RETRIES" else value)
    reset_embedder_cache()
    with routed_to(_session_llm_worker.queue):
        yield _session_llm_worker
    reset_embedder_cache()
    # A test's leftovers (a slow answer still being awaited) must not reach the next test.
    reset_server(llm_server)
