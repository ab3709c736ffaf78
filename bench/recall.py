"""``pmem_bench recall``: does the frontier read find the right cell, by default, in a footprint
a small host holds? For each embedder (hashing, the default MiniLM) a stack started as ``make
run`` starts it (gunicorn with its workers, the Celery worker with beat, the MCP server, the
embedded PostgreSQL and Redis) takes the entity workload over HTTP; then every question is read
in each ranking (hybrid: the default frontier read; cosine: the paper's; rrf: reciprocal rank
fusion, for comparison) and the default one again through ``POST read/``.

Measured: first line is the current value, top-k holds it, a stale line (the object's cell
showing an older location: never, by the frontier's construction — counted anyway), read p50 /
p95, the seconds to commit the 2,000 facts (and until every vector is computed, which a
deferred embedder does after the commit), the stack's proportional memory (PSS, summed over
every process of it, peak), and the meaning workload's top-3 and the paper's alfworld-revision
question read through the frontier (first line is the target's cell with its last location).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import requests
from django.db import connection
from django.test import override_settings

from memory.llm.embedding import embedder_from_settings
from memory.models import Cell, Evidence, Namespace
from memory.selectors.recall import frontier_hybrid_read
from memory.selectors.search import ReadResult, frontier_read
from memory.services import namespace_create, observation_ingest, token_create
from memory.services.embeddings import embeddings_wait
from memory.services.frontier import frontier_flush_wait
from pmem_site import embedded
from pmem_site.run import mcp_command, web_command

from . import recall_workloads as workloads
from .scenarios import alfworld
from .servers import free_port, stop_processes

NAME = "recall"
EMBEDDERS = ("hashing", "minilm")
K = 5
FACTS_PER_POST = 50

Reader = Callable[..., ReadResult]
RANKINGS: dict[str, Reader] = {
    "hybrid": lambda **kw: frontier_hybrid_read(**kw),
    "cosine": lambda **kw: frontier_read(**kw),
    "rrf": lambda **kw: frontier_hybrid_read(fusion="rrf", **kw),
}
#: Done-when figures of the default (make run) configuration.
GOALS = {"first_line": 95.0, "stale": 0.0, "meaning_top3": 18, "pss_mib": 1024,
         "http_p50_ms": 20.0, "ingest_ratio": 2.0}


class RunStack:
    """The processes ``make run`` starts, with its own queue, on the benchmark's database;
    their PSS (with PostgreSQL's and Redis's) sampled while it runs."""

    def __init__(self, out: Path, embedder: str) -> None:
        self.out, self.embedder = out, embedder
        self.queue = f"pmem-recall-{uuid.uuid4().hex[:8]}"
        self.port, self.mcp_port = free_port(), free_port()
        self.env = {**os.environ, "PMEM_EMBEDDER": embedder, "PMEM_QUEUE": self.queue,
                    "PYTHONUNBUFFERED": "1", "DJANGO_SETTINGS_MODULE": "pmem_site.settings",
                    "PMEM_TEST_DB_NAME": str(connection.settings_dict["NAME"]),
                    "PMEM_LOG_LEVEL": "WARNING"}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.peak_pss = 0
        self._stop = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> RunStack:
        root = Path(__file__).resolve().parent.parent
        logs = self.out / "recall-logs"
        logs.mkdir(parents=True, exist_ok=True)
        worker = [sys.executable, "-m", "celery", "-A", "pmem_site", "worker", "-Q", self.queue,
                  "--concurrency", "2", "--loglevel", "INFO", "-n", f"{self.queue}@%h",
                  "--beat", "--schedule", str(logs / f"beat-{self.queue}")]
        commands = {"worker": worker,
                    "web": web_command(self.port, logs / f"gunicorn-{self.queue}.ctl"),
                    "mcp": mcp_command(self.mcp_port, self.url)}
        for name, command in commands.items():
            log = (logs / f"{self.embedder}-{name}.log").open("ab")
            self.procs[name] = subprocess.Popen(command, cwd=root, env=self.env, stdout=log,
                                                stderr=subprocess.STDOUT,
                                                start_new_session=True)
        self._wait_ready(logs / f"{self.embedder}-worker.log")
        threading.Thread(target=self._sample, daemon=True).start()
        return self

    def _wait_ready(self, worker_log: Path, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited (logs in {worker_log.parent})")
            with contextlib.suppress(Exception):
                if (requests.get(f"{self.url}/healthz", timeout=2).status_code < 500
                        and "ready." in worker_log.read_text(errors="replace")):
                    return
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"the stack was not ready after {timeout:.0f}s")

    def processes(self) -> list[psutil.Process]:
        found: list[psutil.Process] = []
        roots = [p.pid for p in self.procs.values()]
        for pidfile in (embedded.data_dir() / "pg" / "postmaster.pid",
                        embedded.data_dir() / "redis" / "redis.pid"):
            with contextlib.suppress(OSError, ValueError):
                roots.append(int(pidfile.read_text().split()[0]))
        for pid in roots:
            with contextlib.suppress(psutil.Error):
                main = psutil.Process(pid)
                found += [main, *main.children(recursive=True)]
        return found

    def pss(self) -> int:
        total = 0
        for proc in self.processes():
            with contextlib.suppress(psutil.Error):
                total += proc.memory_full_info().pss
        return total

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak_pss = max(self.peak_pss, self.pss())
            self._stop.wait(0.5)

    def stop(self) -> None:
        self._stop.set()
        stop_processes(self.procs.values())


def _pending(namespace_id: int) -> bool:
    return (Cell.objects.filter(namespace_id=namespace_id, embed_pending=True).exists()
            or Evidence.objects.filter(namespace_id=namespace_id, embedding__isnull=True,
                                       state="committed").exists())


def _unsettled(namespace_id: int) -> int:
    return Evidence.objects.filter(namespace_id=namespace_id,
                                   state__in=("pending", "processing")).count()


def observations(facts: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """The facts in arrival order, FACTS_PER_POST an observation, a new one begun where a key
    would come twice (two moves of one object are two reports)."""
    out: list[list[tuple[str, str]]] = [[]]
    for key, value in facts:
        if len(out[-1]) == FACTS_PER_POST or any(k == key for k, _ in out[-1]):
            out.append([])
        out[-1].append((key, value))
    return out


def ingest_http(stack: RunStack, ns: Namespace, facts: list[tuple[str, str]],
                timeout: float = 900.0) -> dict[str, float]:
    """POST the facts in arrival order, FACTS_PER_POST an observation; seconds until all are
    committed, and until every vector of theirs is computed."""
    session = requests.Session()
    session.headers["Authorization"] = f"Token {token_create(namespace=ns, client='bench').key}"
    url = f"{stack.url}/api/v1/namespaces/{ns.name}/observations/"
    started = time.perf_counter()
    for batch in observations(facts):
        body = {"facts": [{"key": k, "value": v} for k, v in batch]}
        answer = session.post(url, json=body, timeout=60)
        if answer.status_code != 202:
            raise RuntimeError(f"POST answered {answer.status_code}: {answer.text[:300]}")
    deadline = time.monotonic() + timeout
    while _unsettled(ns.pk):
        if time.monotonic() > deadline:
            raise RuntimeError("observations still unsettled")
        time.sleep(0.02)
    committed = time.perf_counter() - started
    while _pending(ns.pk):
        if time.monotonic() > deadline:
            raise RuntimeError("vectors still pending")
        time.sleep(0.05)
    failed = Evidence.objects.filter(namespace_id=ns.pk, state="failed").count()
    if failed:
        raise RuntimeError(f"{failed} observations failed")
    return {"commit_s": round(committed, 2), "embedded_s": round(time.perf_counter() - started,
                                                                 2)}


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2) if ordered else 0.0


def score(ns: Namespace, questions: list[workloads.Question], reader: Reader,
          k: int = K) -> dict[str, Any]:
    """First line current, top-k holds it, a stale line, latency (in-process read, the query
    embedded afresh: the embedder's query cache is emptied first) and its CPU time."""
    first = top = stale = 0
    times: list[float] = []
    cpu: list[float] = []
    forget = getattr(getattr(embedder_from_settings(), "_queries", None), "cache_clear", None)
    if forget is not None:
        forget()
    for q in questions:
        started, started_cpu = time.perf_counter(), time.thread_time()
        items = reader(namespace=ns, query=q.query, k=k).items
        times.append((time.perf_counter() - started) * 1000)
        cpu.append((time.thread_time() - started_cpu) * 1000)
        first += bool(items) and items[0]["key"] == q.key and items[0]["value"] == q.value
        top += any(i["key"] == q.key and i["value"] == q.value for i in items)
        stale += any(i["key"] == q.key and i["value"] != q.value for i in items)
    n = len(questions)
    return {"n": n, "first_line": round(100 * first / n, 1), "top_k": round(100 * top / n, 1),
            "top_k_hits": top, "stale": round(100 * stale / n, 1),
            "p50_ms": _pct(times, 0.5), "p95_ms": _pct(times, 0.95),
            "cpu_p50_ms": _pct(cpu, 0.5)}


def http_reads(stack: RunStack, ns: Namespace, questions: list[workloads.Question],
               ) -> dict[str, float]:
    """``POST read/`` (the default frontier read, k=5) for every question: p50 / p95 ms."""
    session = requests.Session()
    session.headers["Authorization"] = f"Token {token_create(namespace=ns, client='bench').key}"
    url = f"{stack.url}/api/v1/namespaces/{ns.name}/read/"
    times, floor, first = [], [], 0
    for q in questions:
        started = time.perf_counter()
        answer = session.post(url, json={"query": q.query, "k": K}, timeout=60)
        times.append((time.perf_counter() - started) * 1000)
        items = answer.json()["items"] if answer.status_code == 200 else []
        first += bool(items) and items[0]["key"] == q.key and items[0]["value"] == q.value
        started = time.perf_counter()  # the floor of an API call here: one cell by its key
        session.get(f"{stack.url}/api/v1/namespaces/{ns.name}/cells/{q.key}/", timeout=60)
        floor.append((time.perf_counter() - started) * 1000)
    return {"http_p50_ms": _pct(times, 0.5), "http_p95_ms": _pct(times, 0.95),
            "http_cell_p50_ms": _pct(floor, 0.5),
            "http_first_line": round(100 * first / len(questions), 1)}


def alfworld_questions(run_id: str, cases: int, length: int = 4,
                       ) -> list[tuple[Namespace, workloads.Question]]:
    """The paper's alfworld-revision cases (rule extractor), each in its own namespace."""
    out = []
    for case in alfworld.generate(cases=cases, lengths=(length,)):
        ns = namespace_create(name=f"recall-alf-{run_id}-{case.case}")
        for event in case.events:
            observation_ingest(namespace=ns, text=event.text, source=f"bench:{event.obj}")
        out.append((ns, workloads.Question(case.question, case.key, case.probes[0].gold)))
    embeddings_wait(600)
    frontier_flush_wait(600)
    return out


def run_embedder(embedder: str, out: Path, run_id: str, cases: int,
                 say: Callable[[str], None]) -> list[dict[str, Any]]:
    entity, meaning = workloads.entity(), workloads.meaning()
    rows: list[dict[str, Any]] = []
    with override_settings(PMEM_EMBEDDER=embedder):
        stack = RunStack(out, embedder).start()
        try:
            idle = stack.pss()
            ns = namespace_create(name=f"recall-entity-{embedder}-{run_id}")
            ingest = ingest_http(stack, ns, entity.facts)
            say(f"{embedder}: 2,000 facts committed in {ingest['commit_s']} s, embedded in "
                f"{ingest['embedded_s']} s")
            http = http_reads(stack, ns, entity.questions)
            meaning_ns = namespace_create(name=f"recall-meaning-{embedder}-{run_id}")
            ingest_http(stack, meaning_ns, meaning.facts)
            peak = stack.peak_pss
        finally:
            stack.stop()
        alf = alfworld_questions(f"{embedder}-{run_id}", cases)
        for ranking, reader in RANKINGS.items():
            row: dict[str, Any] = {"embedder": embedder, "ranking": ranking,
                                   **score(ns, entity.questions, reader)}
            meaning_score = score(meaning_ns, meaning.questions, reader, k=3)
            row["meaning_top3"] = meaning_score["top_k_hits"]
            alf_first = sum(score(n, [q], reader)["first_line"] for n, q in alf) / len(alf)
            row["alfworld_first_line"] = round(alf_first, 1)
            if ranking == "hybrid":
                row.update(http)
            row.update(ingest)
            row["pss_mib"] = round(peak / 2**20)
            row["pss_idle_mib"] = round(idle / 2**20)
            rows.append(row)
            say(f"{embedder} {ranking}: {json.dumps(row)}")
    return rows


def run(config: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    cases = config.cases or 20
    run_id = config.run_id[-6:]
    results: list[dict[str, Any]] = []
    for i, embedder in enumerate(EMBEDDERS):
        config.progress(i, len(EMBEDDERS))
        results += run_embedder(embedder, config.out, run_id, cases,
                                lambda line: print(line, file=sys.stderr, flush=True))
    config.progress(len(EMBEDDERS), len(EMBEDDERS))
    load = os.getloadavg()
    return {"k": K, "alfworld_cases": cases, "alfworld_L": 4, "facts_per_post": FACTS_PER_POST,
            "machine": {"cpus": os.cpu_count(), "load_avg": [round(x, 2) for x in load]}}, results


# --- report ---------------------------------------------------------------------------------


COLUMNS = (("embedder", "embedder"), ("ranking", "ranking"), ("first_line", "first line %"),
           ("top_k", "top 5 %"), ("stale", "stale %"), ("meaning_top3", "meaning top 3 /20"),
           ("alfworld_first_line", "alfworld first line %"), ("p50_ms", "read p50 ms"),
           ("p95_ms", "read p95 ms"), ("cpu_p50_ms", "read CPU p50 ms"),
           ("http_p50_ms", "POST read/ p50 ms"),
           ("http_p95_ms", "POST read/ p95 ms"), ("http_cell_p50_ms", "GET cells/{key}/ p50 ms"), ("commit_s", "2,000 facts committed s"),
           ("embedded_s", "… and embedded s"), ("pss_mib", "stack PSS MiB"))


def markdown(config: dict[str, Any], results: list[dict[str, Any]]) -> str:
    lines = [f"## {NAME} (k = {config['k']}; alfworld-revision: {config['alfworld_cases']} "
             f"cases at L = {config['alfworld_L']}; load {config['machine']['load_avg']})", "",
             "| " + " | ".join(t for _, t in COLUMNS) + " |",
             "| " + " | ".join("---" for _ in COLUMNS) + " |"]
    for row in results:
        lines.append("| " + " | ".join("" if row.get(c) is None else str(row[c])
                                       for c, _ in COLUMNS) + " |")
    return "\n".join(lines) + "\n"


def plot(path: Path, results: list[dict[str, Any]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    labels = [f"{r['embedder']}\n{r['ranking']}" for r in results]
    for ax, (metric, title, scale) in zip(axes, (
            ("first_line", "entity: first line current (%)", 1.0),
            ("meaning_top3", "meaning: in top 3 (of 20)", 1.0),
            ("alfworld_first_line", "alfworld-revision: first line (%)", 1.0)), strict=True):
        values = [r[metric] * scale for r in results]
        ax.bar(range(len(values)), values, color=["#4c72b0" if r["ranking"] == "hybrid"
                                                  else "#999999" for r in results])
        ax.set_xticks(range(len(values)), labels, fontsize=7)
        ax.set_title(title, fontsize=9)
    fig.suptitle("pmem_bench recall: embedder x ranking (blue: the default hybrid read)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(out: Path, config: dict[str, Any], results: list[dict[str, Any]]) -> str:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{NAME}.json").write_text(json.dumps({"scenario": NAME, "config": config,
                                                  "results": results}, indent=1, default=str))
    table = markdown(config, results)
    (out / f"{NAME}.md").write_text(table)
    plot(out / f"{NAME}.png", results)
    return table

