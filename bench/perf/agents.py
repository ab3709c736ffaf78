"""``pmem_bench perf``, section "agents" (alone: ``--only agents``): what the MCP server costs
an agent.

The round trip an agent makes all the time — ``remember`` a fact and wait for its commit,
then ``recall`` — through MCP over streamable HTTP (the official SDK's client, one session,
as ``make run`` serves it) and the same two calls straight to the REST API, in one run,
interleaved round by round (REST first on even rounds, MCP first on odd ones) so both see the
same load on this shared machine. Real processes: gunicorn and a Celery worker as ``make run``
starts them, and the MCP server from ``pmem_site.run.mcp_command``. Goal: MCP p50 ≤ 2× REST.
"""

from __future__ import annotations

import contextlib
import os
import socket
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import httpx2
import matplotlib
from django.db import connection
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from bench.servers import free_port, stop_processes
from memory.services import namespace_create, token_create
from pmem_site.run import mcp_command

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

NAME = "agents"
GOAL_RATIO = 2.0
ROUNDS = {"small": 60, "medium": 150, "full": 300}
WARMUP = 5
KEYS = 10  # keys each path cycles through (so the history of a key grows, as an agent's does)
ROOT = Path(__file__).resolve().parent.parent


class AgentStack:
    """gunicorn + a Celery worker (own queue) + the MCP server, on the benchmark's database."""

    def __init__(self, out: Path) -> None:
        self.queue = f"pmem-agents-{uuid.uuid4().hex[:8]}"
        self.web_port, self.mcp_port = free_port(), free_port()
        self.logs = out / "perf-logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.env = {**os.environ, "PMEM_QUEUE": self.queue, "PYTHONUNBUFFERED": "1",
                    "DJANGO_SETTINGS_MODULE": "pmem_site.settings", "PMEM_LOG_LEVEL": "WARNING",
                    "PMEM_TEST_DB_NAME": str(connection.settings_dict["NAME"])}
        # The web server and worker as make run starts them (pmem_site/run.py).
        self.commands = {
            "web": [sys.executable, "-m", "gunicorn", "pmem_site.wsgi:application", "--bind",
                    f"127.0.0.1:{self.web_port}", "--workers", "2", "--threads", "4",
                    "--worker-class", "gthread", "--log-level", "warning"],
            "worker": [sys.executable, "-m", "celery", "-A", "pmem_site", "worker", "-Q",
                       self.queue, "-n", f"{self.queue}@%h", "--concurrency", "2",
                       "--loglevel", "INFO", "--without-gossip", "--without-mingle",
                       "--without-heartbeat"],
            "mcp": mcp_command(self.mcp_port, self.api_url),
        }
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    @property
    def mcp_url(self) -> str:
        return f"http://127.0.0.1:{self.mcp_port}/mcp"

    def __enter__(self) -> AgentStack:
        for name, command in self.commands.items():
            log = (self.logs / f"agents-{name}.log").open("ab")
            self.procs[name] = subprocess.Popen(command, cwd=ROOT, env=self.env, stdout=log,
                                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self._wait_ready()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _wait_ready(self, timeout: float = 90.0) -> None:
        import httpx2

        deadline = time.monotonic() + timeout
        ready: set[str] = set()
        while ready != set(self.procs):
            if time.monotonic() > deadline:
                raise RuntimeError(f"not ready after {timeout:.0f}s: {set(self.procs) - ready}"
                                   f" (logs in {self.logs})")
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited: see {self.logs}/agents-{name}.log")
            with contextlib.suppress(httpx2.HTTPError):
                if httpx2.get(f"{self.api_url}/healthz", timeout=2).status_code < 500:
                    ready.add("web")
            with contextlib.suppress(OSError), socket.create_connection(
                    ("127.0.0.1", self.mcp_port), 0.5):
                ready.add("mcp")
            log = (self.logs / "agents-worker.log").read_text(errors="replace")
            if any(self.queue in line and line.rstrip().endswith("ready.")
                   for line in log.splitlines()):
                ready.add("worker")
            time.sleep(0.2)

    def __exit__(self, *exc: object) -> None:
        stop_processes(self.procs.values())


async def _round_trips(stack: AgentStack, namespace: str, token: str, rounds: int,
                       say: Any) -> dict[str, list[float]]:
    """Seconds per call and per round trip, by path (``rest``, ``mcp``), warm-up excluded."""
    times: dict[str, list[float]] = {f"{path}_{part}": [] for path in ("rest", "mcp")
                                     for part in ("remember", "recall", "round_trip")}
    base = f"/api/v1/namespaces/{namespace}/"

    async def rest_round(i: int) -> tuple[float, float]:
        started = time.perf_counter()
        wrote = await rest.post(f"{base}observations/", params={"wait": "1"}, json={
            "facts": [{"key": f"rest_item_{i % KEYS}", "value": f"place {i}"}]})
        middle = time.perf_counter()
        read = await rest.post(f"{base}read/", json={"query": f"where is rest item {i % KEYS}?"})
        if wrote.status_code != 201 or wrote.json()["status"] != "committed" or read.is_error:
            raise RuntimeError(f"REST round {i}: {wrote.status_code} {wrote.text[:200]}")
        return middle - started, time.perf_counter() - middle

    async def mcp_round(i: int) -> tuple[float, float]:
        started = time.perf_counter()
        wrote = await session.call_tool("remember", {"facts": [
            {"key": f"mcp_item_{i % KEYS}", "value": f"place {i}"}]})
        middle = time.perf_counter()
        read = await session.call_tool("recall", {"query": f"where is mcp item {i % KEYS}?"})
        if wrote.is_error or read.is_error or \
                (wrote.structured_content or {}).get("status") != "committed":
            raise RuntimeError(f"MCP round {i}: {wrote.content} {read.content}")
        return middle - started, time.perf_counter() - middle

    timeout = httpx2.Timeout(30, read=120)
    async with httpx2.AsyncClient(base_url=stack.api_url, timeout=timeout,
                                  headers={"Authorization": f"Token {token}"}) as rest, \
            httpx2.AsyncClient(timeout=timeout,
                               headers={"Authorization": f"Bearer {token}"}) as mcp_http, \
            streamable_http_client(stack.mcp_url, http_client=mcp_http) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        for i in range(WARMUP + rounds):
            paths = (("rest", rest_round), ("mcp", mcp_round))
            for path, run in paths if i % 2 == 0 else reversed(paths):
                remember, recall = await run(i)
                if i >= WARMUP:
                    times[f"{path}_remember"].append(remember)
                    times[f"{path}_recall"].append(recall)
                    times[f"{path}_round_trip"].append(remember + recall)
            if i % 25 == 0:
                say(f"agents: round {i}/{WARMUP + rounds}")
    return times


def _ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def agents_round_trips(perf: Any) -> None:
    """Run the section: result rows into ``perf``, its series, and ``perf-agents.png``."""
    rounds = ROUNDS.get(perf.scale, ROUNDS["medium"])
    namespace = namespace_create(name=f"perf-{perf.run_id}-agents".lower()[:100])
    token = token_create(namespace=namespace, client="bench").key
    with AgentStack(perf.out) as stack:
        times = anyio.run(_round_trips, stack, namespace.name, token, rounds, perf.say)
    for part in ("round_trip", "remember", "recall"):
        for path in ("rest", "mcp"):
            values = times[f"{path}_{part}"]
            perf.add("agents", f"{part.replace('_', ' ')} via {path.upper()} p50",
                     _ms(values, 0.5), "ms", p95=round(_ms(values, 0.95), 1), n=len(values))
    ratio = statistics.median(times["mcp_round_trip"]) / statistics.median(
        times["rest_round_trip"])
    perf.add("agents", "MCP / REST round trip (remember wait + recall), p50", ratio, "x",
             goal=GOAL_RATIO, met=ratio <= GOAL_RATIO)
    perf.series["agents"] = [{"path": key, "seconds": values} for key, values in times.items()]
    plot(perf.out / "perf-agents.png", times, ratio)


def plot(path: Path, times: dict[str, list[float]], ratio: float) -> None:
    fig, (cdf, bars) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, label in (("rest_round_trip", "REST API"), ("mcp_round_trip", "MCP (HTTP)")):
        values = sorted(1000 * v for v in times[name])
        cdf.plot(values, [(i + 1) / len(values) for i in range(len(values))], label=label)
    cdf.set_xlabel("remember (wait) + recall, ms")
    cdf.set_ylabel("fraction of round trips")
    cdf.set_title(f"round trip latency (p50 ratio {ratio:.2f}x, goal <= {GOAL_RATIO:.0f}x)")
    cdf.legend()
    parts = ("remember", "recall")
    width = 0.38
    for offset, route in ((-width / 2, "rest"), (width / 2, "mcp")):
        bars.bar([i + offset for i in range(len(parts))],
                 [_ms(times[f"{route}_{part}"], 0.5) for part in parts], width,
                 label=route.upper())
    bars.set_xticks(range(len(parts)), ["remember (wait)", "recall"])
    bars.set_ylabel("p50, ms")
    bars.set_title("per call")
    bars.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
