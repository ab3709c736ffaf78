"""The comparing half of ``pmem_bench throughput`` (:mod:`bench.throughput` measures): the model
server, the trees measured in turn, and the report (JSON, a Markdown table, a plot)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from .slow_model import SlowModel
from .throughput import NAME, measure, run_child

THIS = "this tree"


def _commit(tree: Path) -> str | None:
    """The commit checked out at ``tree``; None for a copy that is no checkout of its own
    (``git archive``: its directory's name should say which commit)."""
    found = subprocess.run(["git", "rev-parse", "--show-toplevel", "--short", "HEAD"],
                           cwd=tree, capture_output=True, text=True, check=False)
    lines = found.stdout.split()
    if len(lines) != 2 or Path(lines[0]).resolve() != tree.resolve():
        return None
    return lines[1]


def run(config: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Measure this tree (in this process, on its database) or, with ``config.baseline``, this
    tree and the baseline each in a process of its own, ``rounds`` times in turn; the best
    round of each is reported."""
    options = dict(config.throughput)
    upstream = options.get("model_url")
    # Before a real endpoint the same server forwards and counts; the latency is then measured.
    server = SlowModel(options["latency"], options["in_flight"], upstream=upstream).start()
    options["model_url"], options["stats_url"] = server.base_url, server.stats_url
    if upstream:
        options["latency"] = None
    options.update(run=config.run_id[-6:].lower(), logs=str(Path(config.out) / "throughput-logs"))
    Path(config.out).mkdir(parents=True, exist_ok=True)
    try:
        if config.baseline is None and options.get("tree") is None:
            rounds = {THIS: [measure(options, config.progress)]}
        else:
            rounds = _rounds(config, options)
    finally:
        server.close()
    results = []
    for label, measured in rounds.items():
        for cell in _best(measured):
            results.append({"tree": label, **cell})
    here = _this_tree(options)
    run_config = {
        "run_id": config.run_id, "latency_s": options["latency"],
        "latency_source": "measured: the mean time a call held a slot" if upstream else
        "scripted",
        "in_flight": options["in_flight"], "workers": options["workers"],
        "model_concurrency": options["model_concurrency"],
        "observations": options["observations"], "rounds": options.get("rounds", 1),
        "model_url": f"{upstream} (through bench/slow_model.py, counting)" if upstream else
        "scripted (bench/slow_model.py)",
        "this_tree": f"{here} ({_commit(here) or 'a copy, not a checkout'})",
        "baseline": None if config.baseline is None else
        f"{config.baseline} ({_commit(Path(config.baseline)) or 'not a git checkout'})",
        "tokens": "len(text) // 4 (the scripted server's usage), or the endpoint's usage",
        "machine": {"cpus": os.cpu_count(), "load_avg": os.getloadavg()},
    }
    return run_config, results


def _this_tree(options: dict[str, Any]) -> Path:
    """The tree measured as "this tree": ``--tree``, else this checkout."""
    tree = options.get("tree")
    return Path(tree).resolve() if tree else Path(__file__).resolve().parent.parent


def _rounds(config: Any, options: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    trees = {THIS: _this_tree(options)}
    if config.baseline is not None:
        trees = {"baseline": Path(config.baseline).resolve(), **trees}
    measured: dict[str, list[dict[str, Any]]] = {label: [] for label in trees}
    total = int(options.get("rounds", 1)) * len(trees)
    for round_ in range(int(options.get("rounds", 1))):
        for number, (label, tree) in enumerate(trees.items()):
            sys.stderr.write(f"round {round_ + 1}: {label} ({tree})\n")
            slug = "base" if label == "baseline" else "this"
            measured[label].append(run_child(slug, tree, options, Path(config.out)))
            config.progress(round_ * len(trees) + number + 1, total)
    return measured


def _best(measured: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per stream and namespace count, the round with the most observations per second."""
    cells: dict[tuple[str, int], dict[str, Any]] = {}
    for one in measured:
        for row in one["rows"]:
            at = (row["stream"], row["namespaces"])
            if at not in cells or row["obs_per_s"] > cells[at]["obs_per_s"]:
                cells[at] = row
    return list(cells.values())


# --- the report --------------------------------------------------------------------------------

COLUMNS = (("obs/s", "obs_per_s"), ("latency s", "latency_s"), ("ideal", "ideal_obs_per_s"), ("ratio", "ratio"),
           ("calls/obs (server)", "server_chat_calls_per_obs"),
           ("calls/obs (evidence)", "evidence_chat_calls_per_obs"),
           ("prompt tok/obs", "evidence_prompt_tokens_per_obs"),
           ("completion tok/obs", "evidence_completion_tokens_per_obs"),
           ("p50 s", "latency_p50_s"), ("p95 s", "latency_p95_s"), ("failed", "failed"),
           ("repeats", "repeats"), ("heads shown", "extraction_facts_with_head_shown"),
           ("worker RSS MiB", "worker_rss_peak_mib"), ("most in flight", "server_max_in_flight"))


def _cell(value: Any) -> str:
    return "—" if value is None else str(value)


def markdown(config: dict[str, Any], results: list[dict[str, Any]]) -> str:
    lines = [f"## {NAME}", "",
             f"latency {config['latency_s'] or 'per row'} s ({config['latency_source']}), "
             f"{config['in_flight']} in flight, {config['workers']} worker processes, "
             f"PMEM_MODEL_CONCURRENCY={config['model_concurrency']}, "
             f"{config['observations']} observations per stream; model: {config['model_url']}",
             f"this tree: {config['this_tree']}; baseline: {config['baseline'] or '—'}", "",
             "| stream | namespaces | tree | " + " | ".join(c for c, _ in COLUMNS) + " |",
             "| --- | --- | --- | " + " | ".join("---" for _ in COLUMNS) + " |"]
    order = {t: i for i, t in enumerate(("baseline", THIS))}
    for row in sorted(results, key=lambda r: (r["stream"], r["namespaces"],
                                              order.get(r["tree"], 9))):
        lines.append(f"| {row['stream']} | {row['namespaces']} | {row['tree']} | "
                     + " | ".join(_cell(row.get(k)) for _, k in COLUMNS) + " |")
    speedups = _speedups(results)
    if speedups:
        lines += ["", "| stream | namespaces | obs/s, this tree / baseline |", "| --- | --- | --- |"]
        lines += [f"| {s} | {k} | {v} |" for (s, k), v in speedups.items()]
    return "\n".join(lines) + "\n"


def _speedups(results: list[dict[str, Any]]) -> dict[tuple[str, int], float | None]:
    by = {(r["tree"], r["stream"], r["namespaces"]): r for r in results}
    out: dict[tuple[str, int], float | None] = {}
    for (tree, stream, lanes), row in by.items():
        base = by.get(("baseline", stream, lanes))
        if tree == THIS and base is not None:
            out[(stream, lanes)] = (round(row["obs_per_s"] / base["obs_per_s"], 2)
                                    if base["obs_per_s"] else None)
    return out


def _names(config: dict[str, Any]) -> dict[str, str]:
    """Each tree's label with the directory it ran from ("this tree (bench-after-99ed7ce)")."""
    names = {}
    for label, key in (("baseline", "baseline"), (THIS, "this_tree")):
        where = str(config.get(key) or "").split(" (")[0]
        names[label] = f"{label} ({Path(where).name})" if where else label
    return names


def plot(path: Path, results: list[dict[str, Any]], names: dict[str, str] | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = sorted({(r["stream"], r["namespaces"]) for r in results})
    trees = [t for t in ("baseline", THIS) if any(r["tree"] == t for r in results)]
    by = {(r["tree"], r["stream"], r["namespaces"]): r for r in results}
    width = 0.8 / max(len(trees), 1)
    fig, ax = plt.subplots(figsize=(10, 4))
    colours = {"baseline": "#999999", THIS: "#3b7dd8"}
    for t, tree in enumerate(trees):
        xs = [i + (t - (len(trees) - 1) / 2) * width for i in range(len(cells))]
        rows = [by.get((tree, s, k)) for s, k in cells]
        ax.bar(xs, [r["obs_per_s"] if r else 0 for r in rows], width, label=f"{(names or {}).get(tree, tree)}: obs/s",
               color=colours.get(tree))
        ax.scatter(xs, [r["ideal_obs_per_s"] if r and r["ideal_obs_per_s"] else 0 for r in rows],
                   marker="_", s=400, color="#c0392b",
                   label="ideal (in flight / (calls x latency))" if t == 0 else None)
        for x, r in zip(xs, rows, strict=True):
            if r and r.get("ratio") is not None:
                ax.text(x, r["obs_per_s"], f"{r['ratio']:.2f}", ha="center", va="bottom",
                        fontsize=7)
    ax.set_xticks(range(len(cells)), [f"{s}\n{k} ns" for s, k in cells], fontsize=8)
    ax.set_ylabel("observations / s (label: ratio to ideal)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(out: Path, config: dict[str, Any], results: list[dict[str, Any]]) -> str:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{NAME}.json").write_text(json.dumps(
        {"scenario": NAME, "config": config, "results": results}, indent=1, default=str))
    table = markdown(config, results)
    (out / f"{NAME}.md").write_text(table)
    plot(out / f"{NAME}.png", results, _names(config))
    return table
