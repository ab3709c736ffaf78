"""The service's processes a benchmark runs beside itself: gunicorn and a Celery worker on a
queue of their own, on the benchmark's database, their RSS sampled while they run.

It imports nothing of the service but ``pmem_site``'s location (the tree whose processes are
started): ``pmem_bench throughput`` loads it from this checkout into the process that measures
an older tree (:mod:`bench.trees`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path

import psutil
import requests


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop_processes(procs: Iterable[subprocess.Popen[bytes]], wait: float = 15.0) -> None:
    """SIGTERM each process's group, then SIGKILL the groups still there after ``wait``."""
    procs = list(procs)
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


def group_rss(pid: int) -> tuple[int, int]:
    """Bytes held by a process and its descendants: in all, and by the largest one."""
    try:
        main = psutil.Process(pid)
        members = [main, *main.children(recursive=True)]
    except psutil.Error:
        return 0, 0
    sizes = []
    for p in members:
        with contextlib.suppress(psutil.Error):
            sizes.append(p.memory_info().rss)
    return sum(sizes), max(sizes, default=0)


def group_cpu(pid: int) -> float:
    """CPU seconds (user + system) a process and its live descendants have used."""
    try:
        main = psutil.Process(pid)
        members = [main, *main.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0.0
    for p in members:
        with contextlib.suppress(psutil.Error):
            times = p.cpu_times()
            total += times.user + times.system
    return total


class Stack:
    """gunicorn (one process, four threads) and a Celery worker of ``workers`` prefork
    processes, from the tree ``pmem_site`` is imported from, on the current database, with
    ``env`` on top of this process's environment. ``peak`` holds the most bytes the web
    process, the worker's processes together and its largest process held since
    :meth:`reset_peaks`."""

    def __init__(self, *, logs: Path, queue_prefix: str = "pmem-bench", workers: int = 2,
                 env: Mapping[str, str] | None = None, ready_timeout: float = 90.0) -> None:
        from django.db import connection

        import pmem_site

        self.root = Path(pmem_site.__file__).resolve().parent.parent
        self.queue = f"{queue_prefix}-{uuid.uuid4().hex[:8]}"
        self.port = free_port()
        self.workers = workers
        self.logs = logs
        self.ready_timeout = ready_timeout
        logs.mkdir(parents=True, exist_ok=True)
        self.env = {**os.environ, "PMEM_QUEUE": self.queue, "PYTHONUNBUFFERED": "1",
                    "DJANGO_SETTINGS_MODULE": "pmem_site.settings",
                    "PMEM_TEST_DB_NAME": str(connection.settings_dict["NAME"]),
                    "PMEM_LOG_LEVEL": "WARNING", **(env or {})}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.peak: dict[str, int] = {"web": 0, "worker": 0, "worker_max_process": 0}
        self._stop = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Stack:
        web = [sys.executable, "-m", "gunicorn", "pmem_site.wsgi:application", "-b",
               f"127.0.0.1:{self.port}", "--workers", "1", "--threads", "4", "-k", "gthread",
               "--log-level", "warning"]
        worker = [sys.executable, "-m", "celery", "-A", "pmem_site", "worker", "-Q", self.queue,
                  "-n", f"{self.queue}@%h", "--pool", "prefork", "--concurrency",
                  str(self.workers), "--loglevel", "INFO", "--without-gossip",
                  "--without-mingle", "--without-heartbeat"]
        for name, cmd in (("web", web), ("worker", worker)):
            log = (self.logs / f"{name}.log").open("ab")
            self.procs[name] = subprocess.Popen(cmd, cwd=self.root, env=self.env, stdout=log,
                                                stderr=subprocess.STDOUT, start_new_session=True)
        self._wait_ready()
        threading.Thread(target=self._sample, daemon=True).start()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout
        web_ok = worker_ok = False
        while time.monotonic() < deadline and not (web_ok and worker_ok):
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    self.stop()
                    raise RuntimeError(f"{name} exited: see {self.logs / name}.log")
            if not web_ok:
                with contextlib.suppress(requests.RequestException):
                    web_ok = requests.get(f"{self.url}/healthz", timeout=2).status_code < 500
            if not worker_ok:
                text = (self.logs / "worker.log").read_text(errors="replace")
                worker_ok = any(self.queue in line and line.rstrip().endswith("ready.")
                                for line in text.splitlines())
            time.sleep(0.2)
        if not (web_ok and worker_ok):
            self.stop()
            raise RuntimeError(f"web/worker not ready after {self.ready_timeout:.0f}s "
                               f"(logs: {self.logs})")

    def _now(self) -> dict[str, int]:
        web, _ = group_rss(self.procs["web"].pid)
        worker, largest = group_rss(self.procs["worker"].pid)
        return {"web": web, "worker": worker, "worker_max_process": largest}

    def _sample(self) -> None:
        while not self._stop.is_set():
            now = self._now()
            self.peak = {name: max(self.peak[name], now[name]) for name in self.peak}
            self._stop.wait(0.25)

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds the web and the worker processes have used so far."""
        return {name: group_cpu(self.procs[name].pid) for name in ("web", "worker")}

    def reset_peaks(self) -> None:
        """Peaks from now on: what the processes hold now, the most they held from here."""
        self.peak = self._now()

    def stop(self) -> None:
        self._stop.set()
        stop_processes(self.procs.values())
