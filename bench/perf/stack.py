"""Ingest through the HTTP API (gunicorn) and a real Celery worker, and the FactConsolidation
stream end to end; peak RSS of both meanwhile."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psutil
import requests
from django.db import connection
from django.test import override_settings

from bench.audit import stream_audit
from bench.scenarios import factconsolidation as fc
from memory.services import observation_ingest, observations_ingest, token_create

from .common import (
    FACTS_PER_OBSERVATION,
    GOALS,
    SCALES,
    Perf,
    fact_batch,
    flush_index,
    new_namespace,
    scalar,
    wal_lsn,
    wal_since,
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Stack:
    """A gunicorn web process and a Celery worker (real subprocesses, own queue), sharing the
    benchmark's embedded PostgreSQL and Redis; their RSS is sampled while it runs."""
    def __init__(self, perf: Perf, patterns: Path | None) -> None:
        self.queue = f"pmem-perf-{uuid.uuid4().hex[:8]}"
        self.port = free_port()
        self.logs = perf.out / "perf-logs"
        self.logs.mkdir(parents=True, exist_ok=True)

        self.env = {**os.environ, "PMEM_QUEUE": self.queue, "PYTHONUNBUFFERED": "1",
                    "DJANGO_SETTINGS_MODULE": "pmem_site.settings",
                    "PMEM_TEST_DB_NAME": str(connection.settings_dict["NAME"]),
                    "PMEM_LOG_LEVEL": "WARNING",
                    "PMEM_RULE_PATTERNS": str(patterns or "")}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.peak: dict[str, int] = {"web": 0, "worker": 0, "worker_max_process": 0}
        self._stop = threading.Event()
        self._sampler: threading.Thread | None = None

    def start(self) -> Stack:
        root = Path(__file__).resolve().parent.parent
        web = [sys.executable, "-m", "gunicorn", "pmem_site.wsgi:application", "-b",
               f"127.0.0.1:{self.port}", "--workers", "1", "--threads", "4", "-k", "gthread",
               "--log-level", "warning"]
        worker = [sys.executable, "-m", "celery", "-A", "pmem_site", "worker", "-Q",
                  self.queue, "-n", f"{self.queue}@%h", "--pool", "prefork", "--concurrency",
                  "2", "--loglevel", "INFO", "--without-gossip", "--without-mingle",
                  "--without-heartbeat"]
        for name, cmd in (("web", web), ("worker", worker)):
            log = (self.logs / f"{name}.log").open("ab")
            self.procs[name] = subprocess.Popen(cmd, cwd=root, env=self.env, stdout=log,
                                                stderr=subprocess.STDOUT, start_new_session=True)
        self._wait_ready()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()
        return self

    def _wait_ready(self, timeout: float = 90.0) -> None:

        deadline = time.monotonic() + timeout
        web_ok = worker_ok = False
        while time.monotonic() < deadline and not (web_ok and worker_ok):
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited: see {self.logs / name}.log")
            if not web_ok:
                with contextlib.suppress(Exception):
                    web_ok = requests.get(f"{self.url}/healthz", timeout=2).status_code < 500
            if not worker_ok:
                text = (self.logs / "worker.log").read_text(errors="replace")
                worker_ok = any(self.queue in line and line.rstrip().endswith("ready.")
                                for line in text.splitlines())
            time.sleep(0.2)
        if not (web_ok and worker_ok):
            self.stop()
            raise RuntimeError(f"web/worker not ready after {timeout:.0f}s (logs: {self.logs})")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _group_rss(self, name: str) -> tuple[int, int]:

        proc = self.procs[name]
        try:
            main = psutil.Process(proc.pid)
            members = [main, *main.children(recursive=True)]
        except psutil.Error:
            return 0, 0
        sizes = []
        for p in members:
            with contextlib.suppress(psutil.Error):
                sizes.append(p.memory_info().rss)
        return sum(sizes), max(sizes, default=0)

    def _sample(self) -> None:
        while not self._stop.is_set():
            web, _ = self._group_rss("web")
            worker, worker_max = self._group_rss("worker")
            self.peak["web"] = max(self.peak["web"], web)
            self.peak["worker"] = max(self.peak["worker"], worker)
            self.peak["worker_max_process"] = max(self.peak["worker_max_process"], worker_max)
            self._stop.wait(0.25)

    def reset_peaks(self) -> None:
        self.peak = dict.fromkeys(self.peak, 0)

    def stop(self) -> None:

        self._stop.set()
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)


def _unsettled(namespace_id: int) -> int:
    return int(scalar("SELECT count(*) FROM memory_evidence WHERE namespace_id = %s AND"
                       " state IN ('pending', 'processing')", [namespace_id]))


def _post_all(stack: Stack, ns: Any, bodies: list[dict[str, Any]], perf: Perf,
              timeout: float = 1800.0) -> float:
    """POST every observation (wait=0), then wait until the worker committed them all;
    seconds from the first POST to the last commit."""


    token = token_create(namespace=ns, client="perf").key
    session = requests.Session()
    session.headers["Authorization"] = f"Token {token}"
    url = f"{stack.url}/api/v1/namespaces/{ns.name}/observations/"
    started = time.perf_counter()
    for i, body in enumerate(bodies):
        answer = session.post(url, json=body, timeout=60)
        if answer.status_code != 202:
            raise RuntimeError(f"POST answered {answer.status_code}: {answer.text[:300]}")
        if i % 20 == 0:
            perf.progress(perf.stage - 1, perf.stages)
    deadline = time.monotonic() + timeout
    while _unsettled(ns.pk):
        if time.monotonic() > deadline:
            raise RuntimeError(f"observations still unsettled after {timeout:.0f}s")
        time.sleep(0.05)
    elapsed = time.perf_counter() - started
    failed = int(scalar("SELECT count(*) FROM memory_evidence WHERE namespace_id = %s AND"
                         " state = 'failed'", [ns.pk]))
    if failed:
        raise RuntimeError(f"{failed} observations failed (see {stack.logs})")
    return elapsed


def _committed_facts(namespace_id: int) -> int:
    return int(scalar("SELECT count(*) FROM memory_operation WHERE namespace_id = %s AND"
                       " type <> 'reinstate'", [namespace_id]))


def api_and_stream(perf: Perf, services_seconds: float) -> None:


    scale = SCALES[perf.scale]
    patterns = perf.out / "perf-factconsolidation-patterns.json"
    patterns.write_text(json.dumps(fc.rule_pattern_entries(), indent=1))
    stack = Stack(perf, patterns).start()
    try:
        ns = new_namespace(perf, "api")
        n = scale.ingest_observations
        keys = n * FACTS_PER_OBSERVATION // 2
        lsn = wal_lsn()
        elapsed = _post_all(stack, ns, [
            {"facts": fact_batch("fact", i * 30, keys, i), "source": "perf"} for i in range(n)], perf)
        elapsed += flush_index(ns)  # what the worker left outside the frontier index
        wal = wal_since(lsn)
        facts = n * FACTS_PER_OBSERVATION
        rate = facts / elapsed
        perf.add("ingest", "API+worker facts/s", rate, "facts/s", goal=GOALS["api_facts_per_s"],
                 met=rate >= GOALS["api_facts_per_s"])
        perf.add("ingest", "API+worker WAL bytes per fact", wal / facts, "B")
        perf.add("ingest", "API+worker / services time ratio", elapsed / services_seconds, "x")
        perf.add("memory", "web RSS peak during API ingest", stack.peak["web"] / 2**20, "MiB")
        perf.add("memory", "worker RSS peak during API ingest (all processes)",
                 stack.peak["worker"] / 2**20, "MiB")

        perf.next_stage(f"scale run: {scale.stream_facts} FactConsolidation facts via API+worker")
        stream = fc.make_stream(scale.stream_facts, 10)
        pieces = [p for p in fc.chunks(stream) if p.strip()]
        stack.reset_peaks()
        ns = new_namespace(perf, "stream-api")
        elapsed = _post_all(stack, ns, [{"text": p, "source": "perf:fc"} for p in pieces], perf)
        elapsed += flush_index(ns)
        committed = _committed_facts(ns.pk)
        perf.add("scale", "stream facts", len(stream.facts), observations=len(pieces))
        perf.add("scale", "stream via API+worker seconds", elapsed, "s",
                 goal=GOALS["stream_seconds"], met=elapsed <= GOALS["stream_seconds"])
        perf.add("scale", "stream via API+worker facts/s", committed / elapsed, "facts/s")
        perf.add("scale", "stream operations committed", committed)
        audit = stream_audit(ns, stream)
        perf.add("scale", "stream gold_in_keyed_head (API+worker)", audit["gold_in_keyed_head"],
                 "%")
        perf.add("memory", "web RSS peak during scale run", stack.peak["web"] / 2**20, "MiB")
        perf.add("memory", "worker RSS peak during scale run (all processes)",
                 stack.peak["worker"] / 2**20, "MiB")
        perf.add("memory", "worker RSS peak during scale run (largest process)",
                 stack.peak["worker_max_process"] / 2**20, "MiB")
    finally:
        stack.stop()

    perf.say("scale run: the same stream in-process (services + rule extractor)")

    ns = new_namespace(perf, "stream-services")
    with override_settings(PMEM_RULE_PATTERNS=str(patterns)):
        started = time.perf_counter()
        for i, piece in enumerate(pieces):
            observation_ingest(namespace=ns, text=piece, source="perf:fc")
            if i % 20 == 0:
                perf.progress(perf.stage - 1, perf.stages)
        elapsed = time.perf_counter() - started + flush_index(ns)
    perf.add("scale", "stream via services seconds", elapsed, "s",
             goal=GOALS["stream_seconds"], met=elapsed <= GOALS["stream_seconds"])
    perf.add("scale", "stream via services facts/s", _committed_facts(ns.pk) / elapsed, "facts/s")


    ns = new_namespace(perf, "stream-import")
    with override_settings(PMEM_RULE_PATTERNS=str(patterns)):
        started = time.perf_counter()
        for first in range(0, len(pieces), 100):
            observations_ingest(namespace=ns, observations=[
                {"text": p, "source": "perf:fc"} for p in pieces[first:first + 100]])
            perf.progress(perf.stage - 1, perf.stages)
        elapsed = time.perf_counter() - started + flush_index(ns)
    perf.add("scale", "stream via services, group commit, seconds", elapsed, "s",
             goal=GOALS["stream_seconds"], met=elapsed <= GOALS["stream_seconds"])
    audit = stream_audit(ns, stream)
    perf.add("scale", "stream gold_in_keyed_head (group commit)", audit["gold_in_keyed_head"], "%")
