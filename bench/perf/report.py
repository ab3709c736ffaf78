"""perf.json, perf.md (goals first, then every figure) and perf.png."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from .common import GOALS  # noqa: E402
from .graph import plot as plot_graph_memory  # noqa: E402

NAME = "perf"

def write(out: Path, config: dict[str, Any], results: list[dict[str, Any]]) -> str:
    """perf.json, perf.md (goals first, then every figure) and perf.png."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "perf.json").write_text(json.dumps({"scenario": NAME, "config": config,
                                               "results": results}, indent=1, default=str))
    table = markdown(config, results)
    (out / "perf.md").write_text(table)
    plot(out / "perf.png", config, results)
    if config.get("series", {}).get("graph_memory"):
        plot_graph_memory(out / "perf-graph-memory.png", config["series"]["graph_memory"])
    return table


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return "—" if value is None else str(value)


def markdown(config: dict[str, Any], results: list[dict[str, Any]]) -> str:
    load = config.get("machine", {}).get("load_avg")
    lines = [f"## perf (scale {config.get('scale')})", "",
             f"PostgreSQL {config.get('postgres')}, pgvector {config.get('pgvector')}; "
             f"{config.get('machine', {}).get('cpus')} CPUs, load average at the end {load}; "
             f"run took {config.get('seconds')} s. Ratios are measured side by side in this run.",
             "", "### Goals", "", "| measure | value | goal | met |", "|---|---|---|---|"]
    for r in results:
        if "goal" in r:
            lines.append(f"| {r['section']}: {r['metric']} | {_fmt(r['value'])} {r['unit']} | "
                         f"{_fmt(r['goal'])} | {'yes' if r['met'] else '**no**'} |")
    lines += ["", "### Every figure", "", "| section | measure | value | unit | details |",
              "|---|---|---|---|---|"]
    for r in results:
        details = ", ".join(f"{k}={_fmt(v)}" for k, v in r.items()
                            if k not in ("section", "metric", "value", "unit", "goal", "met"))
        lines.append(f"| {r['section']} | {r['metric']} | {_fmt(r['value'])} | {r['unit']} | "
                     f"{details} |")
    return "\n".join(lines) + "\n"


def plot(path: Path, config: dict[str, Any], results: list[dict[str, Any]]) -> None:
    matplotlib.use("Agg")

    series = config.get("series", {})
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    growth = series.get("growth", [])
    ax = axes[0][0]
    if growth:
        xs = [g["versions"] for g in growth]
        ax.plot(xs, [g["facts_per_s"] for g in growth], marker="o", label="services facts/s")
        ax.set_xscale("log")
        ax.set_xlabel("versions in the namespace")
        ax.set_ylabel("facts/s (segment)")
        ax2 = ax.twinx()
        ax2.plot(xs, [g["statements_per_fact"] for g in growth], marker="s", color="tab:green",
                 label="statements/fact")
        ax2.set_ylabel("statements per fact")
        ax.legend(loc="lower left", fontsize=8)
        ax2.legend(loc="lower right", fontsize=8)
    ax.set_title("ingest rate as history grows")
    ax = axes[0][1]
    if growth:
        ax.plot([g["versions"] for g in growth], [g["db_bytes_per_fact"] for g in growth],
                marker="o")
        ax.set_xscale("log")
        ax.set_xlabel("versions in the namespace")
        ax.set_ylabel("database bytes per fact")
    ax.set_title("database size per fact")
    ax = axes[1][0]
    frontier = series.get("frontier", [])
    for cells in dict.fromkeys(r["cells"] for r in frontier):
        for m, style in ((16, "-"), (24, "--")):
            rows = [r for r in frontier if r["cells"] == cells and "ef_search" in r
                    and not r.get("halfvec") and r.get("m") == m
                    and r.get("ef_construction") == 64]
            if rows:
                ax.plot([r["recall"] for r in rows], [r["p95_ms"] for r in rows], marker="o",
                        linestyle=style,
                        label=f"{cells:,} cells m={m} (ef_search "
                              f"{', '.join(str(r['ef_search']) for r in rows)})")
        exact = [r for r in frontier if r["cells"] == cells and r["config"] == "exact scan"]
        if exact:
            ax.axhline(exact[0]["p95_ms"], linestyle=":", color="grey")
    ax.axhline(GOALS["frontier_p95_ms_100k"], color="red", linewidth=0.8, label="20 ms goal")
    ax.set_yscale("log")
    ax.set_xlabel("recall@12 vs exact scan")
    ax.set_ylabel("p95 ms (dotted: exact scan)")
    ax.legend(fontsize=7)
    ax.set_title("frontier top-12, HNSW efc=64 (dashed: m=24)")
    ax = axes[1][1]
    by = {r["metric"]: r["value"] for r in results}
    bars = [(label, by.get(metric)) for label, metric in (
        ("services\n(1/call)", "services facts/s (one observation per call, incl. index flush)"),
        ("services\n(group)", "services facts/s (group commit, incl. index flush)"),
        ("API+worker", "API+worker facts/s"),
        ("COPY/obs", "COPY floor facts/s (COPY+COMMIT per 30 rows)"),
        ("COPY", "COPY floor facts/s (one COPY)"))]
    bars = [(label, v) for label, v in bars if v]
    ax.bar([b[0] for b in bars], [b[1] for b in bars], color="tab:blue")
    ax.set_yscale("log")
    ax.set_ylabel("facts (rows) per second")
    ax.set_title("ingest vs the COPY floor")
    fig.suptitle(f"P-Mem perf, scale {config.get('scale')}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
