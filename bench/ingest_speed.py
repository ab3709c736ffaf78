"""The fast write paths, no model, side by side with a baseline in ONE run:
``python bench/ingest_speed.py [--baseline main] [--observations 300] [--rounds 2]``.

Two figures per tree, 30 facts per observation (half new keys, half updates):

- **services**: ``observation_ingest``, one observation per call, in-process (goal 2,000
  facts/s);
- **API**: a sequential client POSTing ``?wait=1`` to gunicorn, a Celery worker committing
  (goal 600 facts/s), with each request's latency.

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
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FACTS = 30
GOALS = {"services_facts_per_s": 2000.0, "api_facts_per_s": 600.0}


# --- the measuring half: runs in the tree it measures ------------------------------------------


def child(out: Path, observations: int) -> None:
    import django

    from pmem_site import embedded

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pmem_site.settings")
    embedded.start()  # this tree's PostgreSQL and Redis, under its PMEM_DATA_DIR
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    import requests

    from bench.perf.common import Perf, fact_batch, new_namespace
    from bench.perf.stack import Stack
    from memory.services import observation_ingest, token_create

    perf = Perf(scale="small", run_id=uuid.uuid4().hex[:8], out=out.parent,
                progress=lambda done, total: None)
    keys = observations * FACTS // 2
    result: dict[str, Any] = {"observations": observations, "facts_per_observation": FACTS}

    ns = new_namespace(perf, "services")
    for i in range(5):  # warm the caches, the embedder, the prepared statements
        observation_ingest(namespace=ns, facts=fact_batch("warm", i * FACTS, 150, i))
    started = time.perf_counter()
    for i in range(observations):
        observation_ingest(namespace=ns, facts=fact_batch("fact", i * FACTS, keys, i))
    result["services_facts_per_s"] = observations * FACTS / (time.perf_counter() - started)

    stack = Stack(perf, None).start()
    try:
        ns = new_namespace(perf, "api")
        session = requests.Session()
        session.headers["Authorization"] = f"Token {token_create(namespace=ns, client='b').key}"
        url = f"{stack.url}/api/v1/namespaces/{ns.name}/observations/?wait=1"

        def post(facts: list[dict[str, str]]) -> float:
            """Seconds from the commit (its committed_at) to the answer's arrival."""
            answer = session.post(url, json={"facts": facts}, timeout=60)
            arrived = time.time()
            if answer.status_code != 201 or answer.json().get("status") != "committed":
                raise RuntimeError(f"POST answered {answer.status_code}: {answer.text[:300]}")
            committed = datetime.fromisoformat(answer.json()["committed_at"].replace("Z", "+00:00"))
            return arrived - committed.timestamp()

        for i in range(5):
            post(fact_batch("warm", i * FACTS, 150, i))
        latencies, after_commit = [], []
        started = time.perf_counter()
        for i in range(observations):
            began = time.perf_counter()
            after_commit.append(post(fact_batch("fact", i * FACTS, keys, i)))
            latencies.append(time.perf_counter() - began)
        result["api_facts_per_s"] = observations * FACTS / (time.perf_counter() - started)
        for name, values in (("api", latencies), ("api_after_commit", after_commit)):
            values.sort()
            result[f"{name}_p50_ms"] = 1000 * values[len(values) // 2]
            result[f"{name}_p95_ms"] = 1000 * values[int(0.95 * (len(values) - 1))]
    finally:
        stack.stop()
    out.write_text(json.dumps(result, indent=1))


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


def _measure(label: str, tree: Path, observations: int, out: Path) -> dict[str, Any]:
    # Imported here, not above: the child runs this file in a tree that may not have it.
    from bench.trees import run_in_tree

    return run_in_tree(Path(__file__), ["--child", str(out), "--observations", f"{observations}"],
                       tree=tree, data=ROOT / "var" / "bench-ingest" / f"data-{label}", out=out)


def _plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(report["best"])
    panels = (("services_facts_per_s", "observation_ingest, facts/s"),
              ("api_facts_per_s", "API wait=1, sequential, facts/s"),
              ("api_after_commit_p50_ms", "API: answer after committed_at, p50 ms"))
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    for ax, (metric, title) in zip(axes, panels, strict=True):
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
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.observations)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    tree, sha = _baseline_tree(args.baseline)
    trees = {f"{args.baseline} ({sha})": tree, "this checkout": ROOT}
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label in trees}
    for round_ in range(args.rounds):
        for number, (label, where) in enumerate(trees.items()):
            sys.stderr.write(f"round {round_ + 1}/{args.rounds}: {label}\n")
            runs[label].append(_measure(f"{number}", where, args.observations,
                                        args.out / f"ingest-speed-{number}.json"))
    best = {label: {metric: max(r[metric] for r in rs) if metric.endswith("_per_s")
                    else min(r[metric] for r in rs)
                    for metric in rs[0] if metric.endswith(("_per_s", "_ms"))}
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
