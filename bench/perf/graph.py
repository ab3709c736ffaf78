"""``pmem_bench perf``, section *graph memory*: peak RSS of a gunicorn worker serving one cell's
graph: it holds each observation's head once, never its whole text in every node.

The probe that found it: one observation of 500 facts on one key, each value 1.9 KB (a 962 KB
body, under the limit), then ``GET .../cells/blob/graph/`` — 3.36 GB in the web worker, and a
kernel kill with 20 such observations. Here the key grows to 1, 5 and 20 such observations
(``--scale small``: 1 and 5) and, at each size, both graph endpoints (the API's and the
explorer's, which a cell page fetches on every live refresh) are read through a real gunicorn
started as ``pmem_site/run.py`` starts it (one worker). The worker's peak RSS is the kernel's
own high-water mark (``VmHWM`` in ``/proc/PID/status``), reset before each request
(``/proc/PID/clear_refs``), so nothing between two samples is missed. Each request is served
by a fresh worker after one warm-up request for a one-version key, so no figure carries what
an earlier request left in the heap.

With ``--baseline DIR`` (a checkout of older code on the same schema, e.g.
``git archive main | tar -x -C DIR``) a second gunicorn serves the same database from that
checkout, and each request is measured on both, side by side, in the same run. A worker that
passes ``RSS_CAP_MIB`` is killed before it can take the shared machine down with it, and its
figure is reported as at least the cap.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import Any
from urllib.error import HTTPError
from urllib.request import Request, urlopen

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import psutil
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.db import connection

from bench.servers import free_port
from memory.services import observation_ingest, token_create

from .common import new_namespace

PROBE_FACTS = 500
PROBE_VALUE_CHARS = 1900
SIZES = {"small": (1, 5), "medium": (1, 5, 20), "full": (1, 5, 20)}
GOAL_MIB = 200.0
#: A worker past this is killed (the unbounded code grew one to 16.9 GB on 20 observations).
RSS_CAP_MIB = 4096
ROOT = Path(__file__).resolve().parent.parent


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} for process {pid}")


@dataclass
class Reading:
    status: int | None  # None: the worker was killed (over the cap) or the request failed
    seconds: float
    body_bytes: int
    base_mib: float  # the warm worker before the request
    peak_mib: float  # its high-water mark during the request (at least the cap if killed)
    capped: bool


class Web:
    """One gunicorn serving ``root``'s code (``pmem_site/run.py``'s flags, one worker) on the
    benchmark's database."""

    def __init__(self, root: Path, logs: Path, label: str) -> None:
        self.root, self.label, self.port = root, label, free_port()
        self.log = logs / f"graph-web-{label}.log"
        self.env = {**os.environ, "PYTHONPATH": str(root), "PYTHONUNBUFFERED": "1",
                    "DJANGO_SETTINGS_MODULE": "pmem_site.settings",
                    "PMEM_TEST_DB_NAME": str(connection.settings_dict["NAME"]),
                    "PMEM_LOG_LEVEL": "WARNING"}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Web:
        cmd = [sys.executable, "-m", "gunicorn", "pmem_site.wsgi:application", "--bind",
               f"127.0.0.1:{self.port}", "--workers", "1", "--threads", "4", "--worker-class",
               "gthread", "--timeout", "120", "--graceful-timeout", "5", "--log-level", "warning"]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(cmd, cwd=self.root, env=self.env, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def worker(self, timeout: float = 90.0, not_pid: int | None = None) -> int:
        """The worker's pid once it answers (the master respawns a worker that exits)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise RuntimeError(f"gunicorn ({self.label}) exited: see {self.log}")
            with contextlib.suppress(Exception):
                children = [p.pid for p in psutil.Process(self.proc.pid).children()
                            if p.pid != not_pid]
                if children and _get(f"{self.url}/healthz", {}, 5)[0] == 200:
                    return int(children[0])
            time.sleep(0.2)
        raise RuntimeError(f"gunicorn ({self.label}) not ready after {timeout:.0f}s: {self.log}")

    def fresh_worker(self) -> int:
        """A new worker: what one request costs, without what earlier ones left in the heap."""
        old = self.worker()
        with contextlib.suppress(ProcessLookupError):
            os.kill(old, signal.SIGKILL)
        return self.worker(not_pid=old)

    def read(self, path: str, headers: dict[str, str], warm_path: str) -> Reading:
        self.fresh_worker()
        _get(self.url + warm_path, headers, 60)  # code paths loaded
        pid = self.worker()
        base = _status_kib(pid, "VmRSS")
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # resets VmHWM to the current RSS
        killed = threading.Event()
        done = threading.Event()

        def guard() -> None:
            while not done.wait(0.05):
                try:
                    over = _status_kib(pid, "VmRSS") > RSS_CAP_MIB * 1024
                except (OSError, RuntimeError):
                    return
                if over:
                    killed.set()
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                    return

        watcher = threading.Thread(target=guard, daemon=True)
        watcher.start()
        started = time.perf_counter()
        status, size = None, 0
        try:
            status, size = _get(self.url + path, headers, 600)
        except OSError:
            pass
        seconds = time.perf_counter() - started
        peak = RSS_CAP_MIB * 1024
        with contextlib.suppress(OSError, RuntimeError):
            peak = _status_kib(pid, "VmHWM")
        done.set()
        watcher.join()
        if killed.is_set():
            peak = max(peak, RSS_CAP_MIB * 1024)
        return Reading(None if killed.is_set() else status, seconds, size, base / 1024,
                       peak / 1024, killed.is_set())

    def stop(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)


def _grow(ns: Any, key: str, first: int, last: int) -> None:
    """Observations ``first``..``last - 1`` of the probe: 500 facts on ``key``, 1.9 KB each."""
    for o in range(first, last):
        observation_ingest(namespace=ns, source="perf:graph", facts=[
            {"key": key, "value": f"{o:03d}.{i:03d} " + "v" * (PROBE_VALUE_CHARS - 8)}
            for i in range(PROBE_FACTS)])


def _session_cookie() -> str:
    """A logged-in explorer session (a superuser), without a login form round trip."""
    user_model = get_user_model()
    user = (user_model.objects.filter(username="perf-graph").first()
            or user_model.objects.create_superuser("perf-graph", "perf@example.org", None))
    session = import_module(settings.SESSION_ENGINE).SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.save()
    return f"{settings.SESSION_COOKIE_NAME}={session.session_key}"


def graph_memory(perf: Any, baseline: Path | None) -> None:
    """Peak worker RSS for the probe's graph at each size, this code (and ``baseline``)."""
    ns = new_namespace(perf, "graph")
    # A one-version key: each measured request follows a warm-up request for it, so both
    # processes have loaded their code paths and neither carries a previous graph's garbage.
    observation_ingest(namespace=ns, source="perf:graph", facts=[{"key": "warm", "value": "w"}])
    api = {"Authorization": f"Token {token_create(namespace=ns, client='perf').key}"}
    browser = {"Cookie": _session_cookie()}
    endpoints = (("API", f"/api/v1/namespaces/{ns.name}/cells/{{key}}/graph/", api),
                 ("explorer", f"/ns/{ns.name}/cells/{{key}}/graph/", browser))
    logs = perf.out / "perf-logs"
    logs.mkdir(parents=True, exist_ok=True)
    webs = {"new": Web(ROOT, logs, "new").start()}
    if baseline is not None:
        webs["old"] = Web(baseline.resolve(), logs, "old").start()
    series: list[dict[str, Any]] = []
    try:
        for web in webs.values():
            web.worker()
        done = 0
        for size in SIZES[perf.scale]:
            perf.say(f"graph memory: the key grows to {size} observation(s) of "
                     f"{PROBE_FACTS} facts")
            _grow(ns, "blob", done, size)
            done = size
            for endpoint, path, headers in endpoints:
                for label, web in webs.items():
                    r = web.read(path.format(key="blob"), headers, path.format(key="warm"))
                    _report(perf, label, endpoint, size, r)
                    series.append({"code": label, "endpoint": endpoint, "observations": size,
                                   "versions": size * PROBE_FACTS, **r.__dict__})
                    perf.progress(perf.stage - 1, perf.stages)
    finally:
        for web in webs.values():
            web.stop()
    perf.series["graph_memory"] = series
    for endpoint, _, _ in endpoints:
        for size in SIZES[perf.scale]:
            by = {s["code"]: s for s in series
                  if s["endpoint"] == endpoint and s["observations"] == size}
            if "old" in by:
                ratio = by["old"]["peak_mib"] / by["new"]["peak_mib"]
                perf.add("graph memory", f"{endpoint} graph, {size} obs: old / new peak RSS",
                         ratio, "x", at_least=by["old"]["capped"],
                         seconds_ratio=round(by["old"]["seconds"] / by["new"]["seconds"], 1))


def _report(perf: Any, label: str, endpoint: str, size: int, r: Reading) -> None:
    name = f"{endpoint} graph, {size} obs x {PROBE_FACTS} facts ({label} code): worker peak RSS"
    extra: dict[str, Any] = {"status": r.status, "seconds": round(r.seconds, 2),
                             "body_kb": round(r.body_bytes / 1024), "base_mib": round(r.base_mib)}
    if r.capped:
        extra["killed_at_cap"] = True
    if label == "new":
        perf.add("graph memory", name, r.peak_mib, "MiB", goal=GOAL_MIB,
                 met=r.status == 200 and r.peak_mib <= GOAL_MIB, **extra)
    else:
        perf.add("graph memory", name, r.peak_mib, "MiB", **extra)


def plot(path: Path, series: list[dict[str, Any]]) -> None:
    """Peak RSS per size and endpoint, new code beside the baseline (hatched: killed at cap)."""


    sizes = sorted({s["observations"] for s in series})
    bars = sorted({(s["endpoint"], s["code"]) for s in series}, key=lambda b: (b[0], b[1] != "new"))
    width = 0.8 / max(len(bars), 1)
    fig, ax = plt.subplots(figsize=(9, 5))
    colours = {"new": "tab:blue", "old": "tab:red"}
    for j, (endpoint, code) in enumerate(bars):
        rows = {s["observations"]: s for s in series
                if s["endpoint"] == endpoint and s["code"] == code}
        xs = [i + (j - (len(bars) - 1) / 2) * width for i in range(len(sizes))]
        heights = [rows[n]["peak_mib"] if n in rows else 0 for n in sizes]
        drawn = ax.bar(xs, heights, width, color=colours[code],
                       alpha=1.0 if endpoint == "API" else 0.55,
                       label=f"{endpoint} graph, {code} code")
        for bar, n in zip(drawn, sizes, strict=True):
            if n in rows and rows[n]["capped"]:
                bar.set_hatch("//")
                ax.annotate(f"killed at\n{RSS_CAP_MIB / 1024:.0f} GiB cap",
                            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                            ha="center", va="bottom", fontsize=7)
            elif n in rows:
                ax.annotate(f"{rows[n]['peak_mib']:.0f}", (bar.get_x() + bar.get_width() / 2,
                                                           bar.get_height()),
                            ha="center", va="bottom", fontsize=7)
    ax.axhline(GOAL_MIB, color="green", linestyle="--", linewidth=1, label="goal 200 MiB")
    ax.set_yscale("log")
    ax.set_xticks(range(len(sizes)))
    ax.set_xticklabels([f"{n} obs\n({n * PROBE_FACTS:,} versions)" for n in sizes])
    ax.set_ylabel("gunicorn worker peak RSS during the request (MiB, log)")
    ax.set_title(f"One cell's graph: observations of {PROBE_FACTS} facts x "
                 f"{PROBE_VALUE_CHARS / 1000:.1f} KB on one key")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _get(url: str, headers: dict[str, str], timeout: float) -> tuple[int, int]:
    """(status, body bytes) of a GET; an HTTP error status is an answer, not an exception."""
    try:
        with urlopen(Request(url, headers=headers), timeout=timeout) as response:
            return response.status, len(response.read())
    except HTTPError as exc:
        return exc.code, len(exc.read())
