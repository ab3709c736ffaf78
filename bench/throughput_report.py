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
    """Per stream, namespace count and embedder, the round with the most observations per
    second."""
    cells: dict[tuple[str, int, str], dict[str, Any]] = {}
    for one in measured:
        for row in one["rows"]:
            at = (row["stream"], row["namespaces"], str(row.get("embedder", "")))
            if at not in cells or row["obs_per_s"] > cells[at]["obs_per_s"]:
                cells[at] = row
    return list(cells.values())


# --- the report --------------------------------------------------------------------------------

COLUMNS = (("extraction/obs", "extraction_per_obs"), ("identity/obs", "identity_per_obs"),
           ("annotation/obs", "annotation_per_obs"), ("obs/s", "obs_per_s"), ("latency s", "latency_s"), ("ideal", "ideal_obs_per_s"), ("ratio", "ratio"),
           ("calls/obs (server)", "server_chat_calls_per_obs"),
           ("calls/obs (evidence)", "evidence_chat_calls_per_obs"),
           ("prompt tok/obs", "evidence_prompt_tokens_per_obs"),
           ("completion tok/obs", "evidence_completion_tokens_per_obs"),
           ("heads right", "heads_right"), ("p50 s", "latency_p50_s"), ("p95 s", "latency_p95_s"), ("failed", "failed"),
           ("repeats", "repeats"), ("heads shown", "extraction_facts_with_head_shown"),
           ("worker RSS MiB", "worker_rss_peak_mib"), ("most in flight", "server_max_in_flight"),
           ("slots used", "slots_used"), ("idle: lead", "slots_lead"),
           ("idle: gaps", "slots_gaps"), ("idle: tail", "slots_tail"),
           ("machine CPU busy", "machine_cpu_busy"),
           ("worker CPU s/obs", "worker_cpu_s_per_obs"), ("web CPU s/obs", "web_cpu_s_per_obs"))


def _cell(value: Any) -> str:
    return "—" if value is None else str(value)


def _by_kind(row: dict[str, Any]) -> dict[str, Any]:
    """The row with its chat calls per observation of each kind as columns."""
    kinds = row.get("calls_per_obs_by_kind") or {}
    return {**row, **{f"{kind}_per_obs": kinds.get(kind)
                      for kind in ("extraction", "identity", "annotation")}}


def markdown(config: dict[str, Any], results: list[dict[str, Any]]) -> str:
    lines = [f"## {NAME}", "",
             f"latency {config['latency_s'] or 'per row'} s ({config['latency_source']}), "
             f"{config['in_flight']} in flight, {config['workers']} worker processes, "
             f"PMEM_MODEL_CONCURRENCY={config['model_concurrency']}, "
             f"{config['observations']} observations per stream; model: {config['model_url']}",
             f"this tree: {config['this_tree']}; baseline: {config['baseline'] or '—'}", "",
             "| embedder | stream | namespaces | tree | " + " | ".join(c for c, _ in COLUMNS)
             + " |",
             "| --- | --- | --- | --- | " + " | ".join("---" for _ in COLUMNS) + " |"]
    order = {t: i for i, t in enumerate(("baseline", THIS))}
    for row in sorted(results, key=lambda r: (str(r.get("embedder", "")), r["stream"],
                                              r["namespaces"], order.get(r["tree"], 9))):
        row = _by_kind(row)
        lines.append(f"| {row.get('embedder', '—')} | {row['stream']} | {row['namespaces']} | "
                     f"{row['tree']} | " + " | ".join(_cell(row.get(k)) for _, k in COLUMNS)
                     + " |")
    speedups = _speedups(results)
    if speedups:
        lines += ["", "| embedder | stream | namespaces | obs/s, this tree / baseline |",
                  "| --- | --- | --- | --- |"]
        lines += [f"| {e} | {s} | {k} | {v} |" for (e, s, k), v in speedups.items()]
    return "\n".join(lines) + "\n"


def _speedups(results: list[dict[str, Any]]) -> dict[tuple[str, str, int], float | None]:
    by = {(r["tree"], str(r.get("embedder", "")), r["stream"], r["namespaces"]): r
          for r in results}
    out: dict[tuple[str, str, int], float | None] = {}
    for (tree, embedder, stream, lanes), row in by.items():
        base = by.get(("baseline", embedder, stream, lanes))
        if tree == THIS and base is not None:
            out[(embedder, stream, lanes)] = (round(row["obs_per_s"] / base["obs_per_s"], 2)
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
    """Above: obs/s per cell and tree against the ideal (label: their ratio). Below: chat
    calls per observation by kind (extraction, identity, annotation), stacked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = sorted({(str(r.get("embedder", "")), r["stream"], r["namespaces"]) for r in results})
    trees = [t for t in ("baseline", THIS) if any(r["tree"] == t for r in results)]
    by = {(r["tree"], str(r.get("embedder", "")), r["stream"], r["namespaces"]): r
          for r in results}
    width = 0.8 / max(len(trees), 1)
    fig, (ax, calls) = plt.subplots(2, 1, figsize=(max(10, 0.9 * len(cells)), 7.5), sharex=True)
    colours = {"baseline": "#999999", THIS: "#3b7dd8"}
    kinds = (("extraction", "#3b7dd8"), ("identity", "#e67e22"), ("annotation", "#8e44ad"))
    for t, tree in enumerate(trees):
        xs = [i + (t - (len(trees) - 1) / 2) * width for i in range(len(cells))]
        rows = [by.get((tree, *cell)) for cell in cells]
        ax.bar(xs, [r["obs_per_s"] if r else 0 for r in rows], width,
               label=f"{(names or {}).get(tree, tree)}: obs/s", color=colours.get(tree))
        ax.scatter(xs, [r["ideal_obs_per_s"] if r and r["ideal_obs_per_s"] else 0 for r in rows],
                   marker="_", s=400, color="#c0392b",
                   label="ideal (in flight / (calls x latency))" if t == 0 else None)
        for x, r in zip(xs, rows, strict=True):
            if r and r.get("ratio") is not None:
                ax.text(x, r["obs_per_s"], f"{r['ratio']:.2f}", ha="center", va="bottom",
                        fontsize=7)
        bottom = [0.0] * len(cells)
        for kind, colour in kinds:
            heights = [float((r or {}).get("calls_per_obs_by_kind", {}).get(kind) or 0)
                       for r in rows]
            calls.bar(xs, heights, width, bottom=bottom, color=colour,
                      alpha=0.55 if tree == "baseline" else 1.0,
                      edgecolor="black" if tree == "baseline" else None,
                      label=f"{kind} ({(names or {}).get(tree, tree)})")
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
        for x, total in zip(xs, bottom, strict=True):
            if total:
                calls.text(x, total, f"{total:.2f}", ha="center", va="bottom", fontsize=7)
    calls.axhline(1.1, color="#c0392b", linewidth=1, linestyle="--")
    calls.set_xticks(range(len(cells)), [f"{s}\n{k} ns\n{e}" for e, s, k in cells], fontsize=7)
    ax.set_ylabel("observations / s (label: ratio to ideal)")
    calls.set_ylabel("chat calls / observation (dashed: 1.1)")
    ax.legend(fontsize=7)
    calls.legend(fontsize=6, ncol=2)
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
