"""Write a scenario's results as JSON, a Markdown table (the paper's numbers beside ours where
the paper gives them) and a PNG plot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from . import perf  # noqa: E402

#: The paper's own figures, by scenario -> (arm, axis value) -> {column: value}.
#: Table 6 (§4.2.1), Table 8 (Appendix B.3), §4.2.3, Table 7 (§4.3; 455/4,580/18,332 facts are
#: its 6k/64k/262k streams) and Appendix F's audit.
PAPER: dict[str, dict[tuple[str, Any], dict[str, float]]] = {
    "alfworld-revision": {
        **{("commit", L): {"accuracy": 100.0, "context_chars": 30} for L in (1, 2, 4, 8)},
        **{("raw_top10", L): {"accuracy": a, "context_chars": c}
           for L, a, c in ((1, 100.0, 591), (2, 72.9, 621), (4, 42.9, 640), (8, 25.0, 641))},
        **{("raw_order_tags", L): {"accuracy": a}
           for L, a in ((1, 100.0), (2, 97.9), (4, 80.0), (8, 64.3))},
        **{("raw_oracle_order", L): {"accuracy": a}
           for L, a in ((1, 100.0), (2, 100.0), (4, 98.6), (8, 94.3))},
    },
    "retraction": {
        ("commit", 0): {"recovered": 100.0, "wrong": 0.0, "lost": 0.0, "v1_in_store": 100.0},
        ("commit", 32): {"recovered": 100.0, "wrong": 0.0, "lost": 0.0, "v1_in_store": 100.0},
        ("commit_no_retention", 0): {"recovered": 0.0, "wrong": 0.0, "lost": 100.0,
                                     "v1_in_store": 0.0},
        ("commit_no_retention", 32): {"recovered": 0.0, "wrong": 0.0, "lost": 100.0,
                                      "v1_in_store": 0.0},
        ("raw_top10", 0): {"recovered": 97.9, "v1_in_store": 100.0},
        ("raw_top10", 32): {"recovered": 92.0, "wrong": 6.6, "lost": 1.5, "v1_in_store": 100.0},
    },
    "contest": {
        ("commit", None): {"recorded": 100.0, "flagged": 100.0, "accuracy": 97.9},
        ("commit_no_retention", None): {"recorded": 0.0, "flagged": 0.0},
        ("raw_top10", None): {"flagged": 96.4, "accuracy": 57.1},
    },
    "factconsolidation": {
        **{(arm, (size, hops)): {"accuracy": acc, **({"stale_rate": st} if st is not None else {})}
           for arm, rows in {
               "commit": ((455, 95, 41, 4.7), (4580, 95, 21, 5.8), (18332, 88, 11, 4.2)),
               "raw_top12": ((455, 71, 17, 37.5), (4580, 72, 12, 30.4), (18332, 86, 9, 11.3)),
               "raw_order_tags": ((455, 94, 14, 6.3), (4580, 94, 10, 5.8), (18332, 90, 8, 5.6)),
           }.items()
           for size, single, multi, stale in rows
           for hops, acc, st in (("single", single, stale), ("multi", multi, None))},
        ("commit", (18332, None)): {"gold_in_any_head": 99.0, "gold_in_keyed_head": 84.0,
                                    "stale_sibling_rate": 13.0},
        ("commit", (455, None)): {"stale_sibling_rate": 9.9},
    },
}

AXES = ("L", "d", "size", "hops")
SKIP = {"arm", "status", *AXES}


def _axis(row: dict[str, Any], scenario: str) -> Any:
    if scenario == "factconsolidation":
        return (row.get("size"), row.get("hops"))
    return next((row[a] for a in AXES if a in row), None)


def write(out: Path, scenario: str, config: dict[str, Any], results: list[dict[str, Any]]) -> str:
    """Write DIR/{scenario}.json, .md and .png; return the Markdown table."""
    if scenario == "perf":  # its own tables and plots (bench/perf/report.py)
        return perf.write(out, config, results)
    if scenario == "history":  # its own table and plot (bench/history.py)
        from . import history

        return history.write(out, config, results)
    if scenario == "transfer":  # its own table and plot (bench/transfer.py)
        from . import transfer

        return transfer.write(out, config, results)
    if scenario == "recall":  # its own table and plot (bench/recall.py)
        from . import recall

        return recall.write(out, config, results)
    if scenario == "locomo_evidence":  # its own table and plot (bench/locomo_evidence.py)
        from . import locomo_evidence

        return locomo_evidence.write(out, config, results)
    if scenario == "throughput":  # its own table and plot (bench/throughput_report.py)
        from . import throughput_report

        return throughput_report.write(out, config, results)
    if scenario == "sessions":  # its own tables and plot (bench/sessions.py)
        from . import sessions

        return sessions.write(out, config, results)
    if scenario == "erase":  # its own table and plots (bench/erase.py)
        from . import erase

        return erase.write(out, config, results)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{scenario}.json").write_text(json.dumps(
        {"scenario": scenario, "config": config, "results": results}, indent=1, default=str))
    table = markdown(scenario, config, results)
    (out / f"{scenario}.md").write_text(table)
    plot(out / f"{scenario}.png", scenario, results)
    return table


def _columns(results: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    axes = [a for a in AXES if any(a in r for r in results)]
    metrics: list[str] = []
    for row in results:
        metrics += [k for k in row if k not in SKIP and k not in metrics]
    return axes, metrics


def _cell(ours: Any, paper: Any) -> str:
    text = "—" if ours is None else str(ours)
    return text if paper is None else f"{text} ({paper})"


#: The paper's agent model: only a run without a model (the write-path invariants) or with
#: this one is set beside the paper's figures.
PAPER_MODEL = "qwen3-4b"


def comparable(config: dict[str, Any]) -> bool:
    """Whether a run's figures may be shown beside the paper's."""
    model = config.get("model")
    return model is None or PAPER_MODEL in str(model).lower().replace("_", "-")


def markdown(scenario: str, config: dict[str, Any], results: list[dict[str, Any]]) -> str:
    """One row per result; a metric the paper reports shows as ``ours (paper)`` — unless the
    run used another model than the paper's, whose figures are labelled with its name and
    never set beside the paper's."""
    axes, metrics = _columns(results)
    paper = PAPER.get(scenario, {}) if comparable(config) else {}
    head = ["arm", *axes, "status", *metrics]
    note = ("numbers in parentheses are the paper's." if comparable(config) else
            f"figures of {config.get('model')}, not comparable with the paper's "
            "(Qwen3-4B-Instruct): its numbers are not shown.")
    lines = [f"## {scenario}", "",
             f"model: {config.get('model') or 'none (model-free arms only)'}; {note}", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in results:
        theirs = paper.get((row["arm"], _axis(row, scenario)), {})
        cells = [row["arm"], *(str(row.get(a, "")) for a in axes), row.get("status", "")]
        cells += [_cell(row.get(m), theirs.get(m)) for m in metrics]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(path: Path, scenario: str, results: list[dict[str, Any]]) -> None:
    """Accuracy per arm along the scenario's axis (or the audit for FactConsolidation)."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    run = [r for r in results if r.get("accuracy") is not None]
    axis = next((a for a in ("L", "d", "size") if any(a in r for r in results)), None)
    if scenario == "factconsolidation" and not run:
        audit = [r for r in results if r.get("status") == "audit"]
        sizes = [str(r["size"]) for r in audit]
        ax.plot(sizes, [r["gold_in_keyed_head"] for r in audit], marker="o", label="gold in keyed head")
        ax.plot(sizes, [r["stale_sibling_rate"] for r in audit], marker="s", label="stale sibling %")
        ax.set_xlabel("facts in stream")
        ax.set_ylabel("%")
    elif axis is None:
        _bars(ax, run)
    else:
        for arm in dict.fromkeys(r["arm"] for r in run):
            rows = [r for r in run if r["arm"] == arm]
            label = arm
            if axis is None or scenario == "factconsolidation":
                xs = [f"{r.get('size', '')} {r.get('hops', '')}".strip() or arm for r in rows]
            else:
                xs = [str(r[axis]) for r in rows]
            ax.plot(xs, [r["accuracy"] for r in rows], marker="o", label=label)
        ax.set_xlabel(axis or "arm")
        ax.set_ylabel("accuracy (%)")
    ax.set_ylim(-5, 105)
    ax.set_title(scenario)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


#: Percentages a probe without an axis reports per arm (the contest probe), drawn as bars.
BAR_METRICS = ("recorded", "flagged", "accuracy")


def _bars(ax: Any, run: list[dict[str, Any]]) -> None:
    """Grouped bars: one group per arm, one bar per metric the rows carry."""
    metrics = [m for m in BAR_METRICS if any(r.get(m) is not None for r in run)]
    width = 0.8 / max(len(metrics), 1)
    for i, metric in enumerate(metrics):
        xs = [j + i * width for j in range(len(run))]
        ax.bar(xs, [r.get(metric) or 0 for r in run], width, label=metric)
    ax.set_xticks([j + width * (len(metrics) - 1) / 2 for j in range(len(run))])
    ax.set_xticklabels([r["arm"] for r in run])
    ax.set_xlabel("arm")
    ax.set_ylabel("%")
