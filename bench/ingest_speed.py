"""The fast write paths, no model, side by side with a baseline in ONE run:
``python bench/ingest_speed.py [--baseline main] [--observations 300] [--rounds 2]``.

Two figures per tree, 30 facts per observation (half new keys, half updates):

- **services**: ``observation_ingest``, one observation per call, in-process (goal 2,000
  facts/s);
- **API**: a sequential client POSTing ``?wait=1`` to gunicorn, a Celery worker committing
  (goal 600 facts/s), with each request's latency, and how long after the commit the answer
  arrives (goal 10 ms).

"After the commit" is timed from the commit's own notice: the measuring process LISTENs on
the channel the commit NOTIFYs inside its transaction (``pmem_settled``), on a connection of
its own, and notes when the notice naming the observation arrives. PostgreSQL delivers it
only once the COMMIT has returned (after the WAL flush), and it reaches this listener the
way it reaches the web process's, so "answer after the notice" is the wake path itself:
the web process's listener, the waiting request's re-read and rendering, the answer's
travel. "Notice after committed_at" (``committed_at`` is taken as the commit's transaction
begins) is the commit's own duration, plus the notice's delivery.

The baseline is the committed tree of ``--baseline`` (``git archive``, under
``var/bench-ingest/``); this checkout is the other. Each tree runs in a process of its own
from its own directory, on a PostgreSQL and Redis of its own, with this checkout's interpreter;
the rounds alternate the trees (baseline, this, baseline, this, …) so that a machine busy for
a while weighs on both, and the best round of each is reported. Writes
``bench/out/ingest-speed.json`` and ``bench/out/ingest-speed.png``. The measuring half
(``--child``, run by :func:`bench.trees.run_in_tree`) uses only what both trees have:
``bench.perf.common`` and ``bench.perf.stack``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FACTS = 30
GOALS = {"services_facts_per_s": 2000.0, "api_facts_per_s": 600.0,
         "api_after_notice_p50_ms": 10.0}


# --- the measuring half: runs in the tree it measures ------------------------------------------


class NoticeClock:
    """When each evidence id's settled notice arrived here (``time.time()``), heard on a
    listening connection of this process's own."""

    CHANNEL = "pmem_settled"  # memory.domain.SETTLED_CHANNEL; the baseline's is the same

    def __init__(self) -> None:
        self.heard: dict[int, float] = {}
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="notice-clock")

    def start(self) -> NoticeClock:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the notice clock could not listen")
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)

    def _run(self) -> None:
        import psycopg
        from django.db import connection

        params = dict(connection.get_connection_params())
        for django_only in ("cursor_factory", "context", "prepare_threshold"):
            params.pop(django_only, None)
        with psycopg.connect(**params, autocommit=True) as conn:
            conn.execute(f"LISTEN {self.CHANNEL}")
            self._ready.set()
            while not self._stop.is_set():
                for notice in conn.notifies(timeout=0.2):
                    now = time.time()
                    for part in notice.payload.split(","):
                        if part.strip().isdigit():
                            self.heard.setdefault(int(part), now)

    def when(self, evidence_id: int, timeout: float = 2.0) -> float | None:
        """The notice's arrival; None if it never came (a missed notice is reported, not
        guessed at)."""
        until = time.monotonic() + timeout
        while evidence_id not in self.heard and time.monotonic() < until:
            time.sleep(0.001)
        return self.heard.get(evidence_id)


def child(out: Path, observations: int, parts: set[str]) -> None:
    import django

    from pmem_site import embedded

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pmem_site.settings")
    embedded.start()  # this tree's PostgreSQL and Redis, under its PMEM_DATA_DIR
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from bench.perf.common import Perf

    perf = Perf(scale="small", run_id=uuid.uuid4().hex[:8], out=out.parent,
                progress=lambda done, total: None)
    keys = observations * FACTS // 2
    result: dict[str, Any] = {"observations": observations, "facts_per_observation": FACTS}

    if "services" in parts:
        _services(perf, result, observations, keys)
    if "api" in parts:
        _api(perf, result, observations, keys)
    out.write_text(json.dumps(result, indent=1))


def _services(perf: Any, result: dict[str, Any], observations: int, keys: int) -> None:
    from bench.perf.common import fact_batch, new_namespace
    from memory.services import observation_ingest

    ns = new_namespace(perf, "services")
    for i in range(5):  # warm the caches, the embedder, the prepared statements
        observation_ingest(namespace=ns, facts=fact_batch("warm", i * FACTS, 150, i))
    started, cpu = time.perf_counter(), time.process_time()
    for i in range(observations):
        observation_ingest(namespace=ns, facts=fact_batch("fact", i * FACTS, keys, i))
    result["services_facts_per_s"] = observations * FACTS / (time.perf_counter() - started)
    # This process's CPU (not PostgreSQL's) per observation: what a busy machine inflates
    # less than the wall clock, and what no fewer round trips can take away.
    result["services_cpu_per_observation_ms"] = 1000 * (time.process_time() - cpu) / observations


def _api(perf: Any, result: dict[str, Any], observations: int, keys: int) -> None:
    import requests

    from bench.perf.common import fact_batch, new_namespace
    from bench.perf.stack import Stack
    from memory.services import token_create

    stack = Stack(perf, None).start()
    clock = NoticeClock().start()
    try:
        ns = new_namespace(perf, "api")
        session = requests.Session()
        session.headers["Authorization"] = f"Token {token_create(namespace=ns, client='b').key}"
        url = f"{stack.url}/api/v1/namespaces/{ns.name}/observations/?wait=1"

        def post(facts: list[dict[str, str]]) -> tuple[float, int, float]:
            """The answer's arrival, its evidence id, and its committed_at (``time.time()``)."""
            answer = session.post(url, json={"facts": facts}, timeout=60)
            arrived = time.time()
            if answer.status_code != 201 or answer.json().get("status") != "committed":
                raise RuntimeError(f"POST answered {answer.status_code}: {answer.text[:300]}")
            body = answer.json()
            committed = datetime.fromisoformat(body["committed_at"].replace("Z", "+00:00"))
            return arrived, int(body["id"]), committed.timestamp()

        for i in range(5):
            post(fact_batch("warm", i * FACTS, 150, i))
        latencies, answers = [], []
        started = time.perf_counter()
        for i in range(observations):
            began = time.perf_counter()
            answers.append(post(fact_batch("fact", i * FACTS, keys, i)))
            latencies.append(time.perf_counter() - began)
        result["api_facts_per_s"] = observations * FACTS / (time.perf_counter() - started)
        after_notice, commit_took, missed = [], [], 0
        for arrived, evidence_id, committed_at in answers:
            heard = clock.when(evidence_id)
            if heard is None:
                missed += 1
                continue
            after_notice.append(arrived - heard)
            commit_took.append(heard - committed_at)
        result["notices_missed"] = missed
        for name, values in (("api", latencies), ("api_after_notice", after_notice),
                             ("commit_to_notice", commit_took)):
            values.sort()
            if values:
                result[f"{name}_p50_ms"] = 1000 * values[len(values) // 2]
                result[f"{name}_p95_ms"] = 1000 * values[int(0.95 * (len(values) - 1))]
    finally:
        clock.stop()
        stack.stop()


# --- the comparing half --------------------------------------------------------------------------


def _baseline_tree(ref: str) -> tuple[Path, str]:
    sha = subprocess.run(["git", "rev-parse", "--short", ref], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout.strip()
    tree = ROOT / "var" / "bench-ingest" / f"tree-{sha}"
    if not (tree / "manage.py").exists():
        tree.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", sha], cwd=ROOT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree, sha


def _measure(label: str, tree: Path, observations: int, out: Path,
             parts: str) -> dict[str, Any]:
    # Imported here, not above: the child runs this file in a tree that may not have it.
    from bench.trees import run_in_tree

    return run_in_tree(Path(__file__), ["--child", str(out), "--observations", f"{observations}",
                                        "--parts", parts],
                       tree=tree, data=ROOT / "var" / "bench-ingest" / f"data-{label}", out=out)


def _plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(report["best"])
    panels = [(metric, title) for metric, title in (
        ("services_facts_per_s", "observation_ingest, facts/s"),
        ("api_facts_per_s", "API wait=1, sequential, facts/s"),
        ("api_after_notice_p50_ms", "API: answer after the commit, p50 ms"))
        if any(metric in report["best"][label] for label in labels)]  # the parts measured
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.6), squeeze=False)
    for ax, (metric, title) in zip(axes[0], panels, strict=True):
        values = [report["best"][label].get(metric, 0.0) for label in labels]
        ax.bar(labels, values, color=["#999999", "#3b7dd8"][:len(labels)])
        if metric in GOALS:
            ax.axhline(GOALS[metric], color="#c0392b", linestyle="--", label="goal")
            ax.legend(fontsize=8)
        for i, value in enumerate(values):
            ax.text(i, value, f"{value:,.0f}" if value >= 10 else f"{value:.1f}", ha="center",
                    va="bottom")
        ax.set_title(title, fontsize=9)
        ax.tick_params(axis="x", labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--baseline", default="main")
    parser.add_argument("--observations", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--parts", default="services,api",
                        help="which paths to measure: services, api, or both (the default)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.observations, set(args.parts.split(",")))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    tree, sha = _baseline_tree(args.baseline)
    trees = {f"{args.baseline} ({sha})": tree, "this checkout": ROOT}
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label in trees}
    for round_ in range(args.rounds):
        for number, (label, where) in enumerate(trees.items()):
            sys.stderr.write(f"round {round_ + 1}/{args.rounds}: {label}\n")
            runs[label].append(_measure(f"{number}", where, args.observations,
                                        args.out / f"ingest-speed-{number}.json", args.parts))
    best = {label: {metric: max(r[metric] for r in rs) if metric.endswith("_per_s")
                    else min(r[metric] for r in rs)
                    for metric in rs[0] if metric.endswith(("_per_s", "_ms"))
                    and all(metric in r for r in rs)}
            for label, rs in runs.items()}
    report = {"goals": GOALS, "observations": args.observations, "facts_per_observation": FACTS,
              "rounds": runs, "best": best}
    (args.out / "ingest-speed.json").write_text(json.dumps(report, indent=1))
    _plot(report, args.out / "ingest-speed.png")
    for label, figures in best.items():
        print(label, {k: round(v, 1) for k, v in figures.items()})


if __name__ == "__main__":
    # Run as a script, this file would find the installed checkout's bench package first.
    sys.path.insert(0, str(ROOT))
    main()
