"""Reads right after writes, with the embedding deferred past the commit as production runs it
(MiniLM, the background embedder on), side by side with a baseline tree in ONE run:
``python bench/read_your_writes.py [--baseline main] [--observations 200] [--reads 200]
[--rounds 2]``.

Per tree, in-process through the services the API calls (no HTTP: the difference measured is
the read's, not the transport's):

- **ingest**: ``observation_ingest`` of observations of 10 facts each (half new keys, half
  updates), facts/s until the last commit (the vectors come after, on the background thread);
- **settled reads**: once the background pass is done, ``frontier`` and ``raw`` reads of the
  namespace, p50/p95 ms (what every read pays for the check that nothing is pending);
- **read after write**: one new fact committed, then at once a ``frontier`` read for it; p50/p95
  ms of that read and the share of reads that hold the fact (``hit_rate``; SPEC §11.1 asks 1).

The baseline is the committed tree of ``--baseline`` (``git archive`` under
``var/bench-ryw/``); each tree runs in a process of its own, from its own directory, on a
PostgreSQL and Redis of its own (:func:`bench.trees.run_in_tree`); rounds alternate the trees
and the best round of each is reported. Writes ``bench/out/read-your-writes.json`` and
``bench/out/read-your-writes.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FACTS = 10
QUERIES = ["where does user {i} live?", "what is item {i}'s colour?", "who owns thing {i}?",
           "when is meeting {i}?"]


def _ms(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return (1000 * statistics.median(ordered),
            1000 * ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))])


# --- the measuring half: runs in the tree it measures ------------------------------------------


def child(out: Path, observations: int, reads: int) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pmem_site.settings")
    os.environ["PMEM_EMBEDDER"], os.environ["PMEM_EMBED_ASYNC"] = "minilm", "1"
    import django

    from pmem_site import embedded

    embedded.start()
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from memory.reads import read
    from memory.services import namespace_create, observation_ingest
    from memory.services.embeddings import embeddings_wait

    result: dict[str, Any] = {"observations": observations, "facts_per_observation": FACTS}
    ns = namespace_create(name=f"ryw-{os.getpid()}")
    keys = observations * FACTS // 2

    def batch(i: int) -> list[dict[str, str]]:
        return [{"key": f"thing_{(i * FACTS + j) % keys}_owner",
                 "value": f"person {i} {j} of house {(i + j) % 97}"} for j in range(FACTS)]

    for i in range(3):  # warm the embedder and the prepared statements
        observation_ingest(namespace=ns, facts=batch(i))
    embeddings_wait(timeout=600)
    started = time.perf_counter()
    for i in range(observations):
        observation_ingest(namespace=ns, facts=batch(i))
    result["ingest_facts_per_s"] = observations * FACTS / (time.perf_counter() - started)
    embeddings_wait(timeout=600)

    for mode in ("frontier", "raw"):
        times = []
        for i in range(reads):
            began = time.perf_counter()
            read(mode, namespace=ns, query=QUERIES[i % len(QUERIES)].format(i=i))
            times.append(time.perf_counter() - began)
        result[f"settled_{mode}_p50_ms"], result[f"settled_{mode}_p95_ms"] = _ms(times)

    times, hits = [], 0
    for i in range(reads):
        key, value = f"pet_{i}_name", f"a cat called Miso {i}"
        observation_ingest(namespace=ns, facts=[{"key": key, "value": value}])
        began = time.perf_counter()
        items = read("frontier", namespace=ns, query=f"what is pet {i} called?", k=5).items
        times.append(time.perf_counter() - began)
        hits += any(item["key"] == key for item in items)
    result["after_write_p50_ms"], result["after_write_p95_ms"] = _ms(times)
    result["after_write_hit_rate"] = hits / reads
    embeddings_wait(timeout=600)
    out.write_text(json.dumps(result, indent=1))


# --- the comparing half --------------------------------------------------------------------------


def _baseline_tree(ref: str) -> tuple[Path, str]:
    sha = subprocess.run(["git", "rev-parse", "--short", ref], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout.strip()
    tree = ROOT / "var" / "bench-ryw" / f"tree-{sha}"
    if not (tree / "manage.py").exists():
        tree.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", sha], cwd=ROOT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree, sha


def _plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(report["best"])
    panels = [("ingest_facts_per_s", "ingest, facts/s"),
              ("settled_frontier_p50_ms", "settled frontier read, p50 ms"),
              ("settled_raw_p50_ms", "settled raw read, p50 ms"),
              ("after_write_p50_ms", "read right after a write, p50 ms"),
              ("after_write_hit_rate", "read after write holds the fact")]
    fig, axes = plt.subplots(1, len(panels), figsize=(3.3 * len(panels), 3.4), squeeze=False)
    for ax, (metric, title) in zip(axes[0], panels, strict=True):
        values = [report["best"][label].get(metric, 0.0) for label in labels]
        ax.bar(labels, values, color=["#999999", "#3b7dd8"][:len(labels)])
        for i, value in enumerate(values):
            ax.text(i, value, f"{value:,.0f}" if value >= 10 else f"{value:.2f}", ha="center",
                    va="bottom")
        ax.set_title(title, fontsize=9)
        ax.tick_params(axis="x", labelsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--baseline", default="main")
    parser.add_argument("--observations", type=int, default=200)
    parser.add_argument("--reads", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.observations, args.reads)
        return
    from bench.trees import run_in_tree

    args.out.mkdir(parents=True, exist_ok=True)
    tree, sha = _baseline_tree(args.baseline)
    trees = {f"{args.baseline} ({sha})": tree, "this checkout": ROOT}
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label in trees}
    for round_ in range(args.rounds):
        for number, (label, where) in enumerate(trees.items()):
            sys.stderr.write(f"round {round_ + 1}/{args.rounds}: {label}\n")
            out = args.out / f"read-your-writes-{number}.json"
            runs[label].append(run_in_tree(
                Path(__file__), ["--child", str(out), "--observations", str(args.observations),
                                 "--reads", str(args.reads)],
                tree=where, data=ROOT / "var" / "bench-ryw" / f"data-{number}", out=out,
                bench_from_here=True))
    best = {label: {metric: max(r[metric] for r in rs)
                    if metric.endswith(("_per_s", "_rate")) else min(r[metric] for r in rs)
                    for metric in rs[0] if metric.endswith(("_per_s", "_ms", "_rate"))}
            for label, rs in runs.items()}
    report = {"observations": args.observations, "facts_per_observation": FACTS,
              "reads": args.reads, "rounds": runs, "best": best}
    (args.out / "read-your-writes.json").write_text(json.dumps(report, indent=1))
    _plot(report, args.out / "read-your-writes.png")
    for label, figures in best.items():
        print(label, {k: round(v, 2) for k, v in figures.items()})


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
