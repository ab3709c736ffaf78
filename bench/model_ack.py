"""A model call's cost outside the model: the SDK's own HTTP client beside the model client's
(``memory.llm.quickack``), against a server that writes headers and body apart with Nagle on.

The bench's scripted server (:mod:`bench.slow_model`, Python's ``http.server``) answers at
once (latency 0), so what a call costs is the round trip alone. Both clients make ``--calls``
calls on one warm keep-alive connection each, in alternating blocks of 20 so that load on this
shared machine falls on both alike; per client: p50, p90 and the kernel's count of delayed
acknowledgements (``DelayedACKs`` in /proc/net/netstat, Linux) over its calls.

``python -m bench.model_ack [--calls 400] [--out bench/out]`` writes ``model-ack.json`` and
``model-ack.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

BLOCK = 20


def _delayed_acks() -> int | None:
    try:
        lines = Path("/proc/net/netstat").read_text().splitlines()
    except OSError:
        return None
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        if names.startswith("TcpExt:"):
            return int(values.split()[names.split().index("DelayedACKs")])
    return None


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(calls: int) -> dict[str, Any]:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pmem_site.settings")
    django.setup()
    import openai

    from bench.slow_model import SlowModel
    from memory.llm.transport import sdk_client

    server = SlowModel(0.0, 8).start(0)
    clients = {"SDK's client": openai.OpenAI(base_url=server.base_url, api_key="x",
                                             max_retries=0),
               "model client (quick ACK)": sdk_client(server.base_url, "x", 30.0)}
    seconds: dict[str, list[float]] = {name: [] for name in clients}
    delayed: dict[str, int] = dict.fromkeys(clients, 0)
    messages = [{"role": "user", "content": "hello"}]
    for client in clients.values():  # open and warm each connection
        client.chat.completions.create(model="slow", messages=messages)
    for block in range(0, calls, BLOCK):
        for name, client in clients.items():
            before = _delayed_acks()
            for _ in range(min(BLOCK, calls - block)):
                started = time.perf_counter()
                client.chat.completions.create(model="slow", messages=messages)
                seconds[name].append(time.perf_counter() - started)
            after = _delayed_acks()
            if before is not None and after is not None:
                delayed[name] += after - before
        print(f"model-ack: {block + BLOCK}/{calls} calls each", file=sys.stderr, flush=True)
    rows = [{"client": name, "calls": len(values),
             "p50_ms": round(1000 * statistics.median(values), 2),
             "p90_ms": round(1000 * _pct(values, 0.9), 2),
             "delayed_acks": delayed[name]} for name, values in seconds.items()]
    plain, ours = rows
    return {"rows": rows, "p50_ratio": round(plain["p50_ms"] / ours["p50_ms"], 1)}


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    names = [r["client"] for r in rows]
    ax.bar(names, [r["p50_ms"] for r in rows], color=["#999999", "#3b7dd8"], label="p50")
    ax.scatter(names, [r["p90_ms"] for r in rows], color="#c0392b", zorder=3, label="p90")
    for i, r in enumerate(rows):
        ax.annotate(f"{r['p50_ms']} ms\n{r['delayed_acks']} delayed ACKs / {r['calls']}",
                    (i, r["p50_ms"]), ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("one call to an instant server, ms")
    ax.set_title("a model call outside the model (Nagle on at the server)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--out", type=Path, default=Path("bench/out"))
    args = parser.parse_args()
    result = measure(args.calls)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "model-ack.json").write_text(json.dumps(result, indent=2))
    plot(result, args.out / "model-ack.png")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
