"""The change feed (SPEC §12): what writing it costs a commit, events per second read through it,
and how many server-sent-event subscribers one web process serves.

``python -m bench.changes [--events 5000] [--subscribers 1,2,4,8,16] [--out bench/out]`` (with
``PMEM_DATA_DIR`` set as for ``make run``; it migrates first). Three parts, side by side in
one run:

- **write cost**: observations of 20 facts committed in this process, in rounds that alternate
  two arms on the same namespace: the write path as it is, and the same with the feed's one
  statement (its events, cursors and notice) left out — the commit's cost of the feed, as the
  ratio of the arms' events per second;
- **read**: the feed read from the start through gunicorn (one process, four gthread threads,
  as ``bench.servers.Stack`` runs it), ``limit=1000`` per page, beside the operation log read
  the same way (``operations/?limit=500``) in the same run;
- **subscribers**: S server-sent-event subscribers at once (each a thread of this process,
  reconnecting after the ``retry:`` hint with ``Last-Event-ID``, as EventSource does) while
  this process commits an event every 100 ms; per S: each event's lag from its commit to each
  subscriber (p50, p95), whether every subscriber got every event, how many streams were held
  open, and the latency of an unrelated request (``whoami``) meanwhile — that the streams leave
  the API its threads.

Writes ``changes.json``, ``changes.md`` and ``changes.png`` under ``--out``."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import requests

FACTS_PER_OBSERVATION = 20
WRITE_EVERY = 0.1  # seconds between the subscribers' run's commits
RUN_SECONDS = 8.0  # the subscribers' run per S


def _setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pmem_site.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def _no_events(namespace_id: int, rows: Any) -> None:
    """The arm without the feed: the writer's events not written."""


def _write(ns: Any, events: int, rounds: int = 4) -> dict[str, Any]:
    """Commit ``events`` facts per arm, in ``rounds`` alternating rounds; each arm's rate."""
    from memory.services import observation_ingest, writer

    recording = writer.events_record
    spent = {"feed": 0.0, "none": 0.0}
    per_round = events // rounds
    written = 0
    for _ in range(rounds):
        for arm in ("feed", "none"):
            writer.events_record = recording if arm == "feed" else _no_events
            started = time.perf_counter()
            for _ in range(0, per_round, FACTS_PER_OBSERVATION):
                observation_ingest(namespace=ns, actor="api:bench", facts=[
                    {"key": f"k{(written + i) % 500}", "value": f"v{written + i}"}
                    for i in range(FACTS_PER_OBSERVATION)])
                written += FACTS_PER_OBSERVATION
            spent[arm] += time.perf_counter() - started
    writer.events_record = recording
    with_feed = rounds * per_round / spent["feed"]
    without = rounds * per_round / spent["none"]
    return {"events": rounds * per_round, "events_per_second_written": round(with_feed),
            "events_per_second_without_feed": round(without),
            "feed_cost": round(1 - with_feed / without, 3)}


def _read_all(url: str, token: str, first: str) -> tuple[int, float]:
    """Follow a paged list from ``first`` until a page comes back empty (the feed) or without
    ``next`` (the log); items and seconds."""
    headers = {"Authorization": f"Token {token}"}
    started = time.perf_counter()
    items, page = 0, f"{url}{first}"
    while page:
        body = requests.get(page, headers=headers, timeout=60).json()
        items += len(body["results"])
        page = body["next"] if body["results"] else None
    return items, time.perf_counter() - started


class _Subscriber(threading.Thread):
    """One EventSource-like subscriber: reads frames, reconnects after the server's ``retry:``
    with ``Last-Event-ID``; records each event's arrival time."""

    def __init__(self, url: str, token: str, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.url, self.token, self.stop = url, token, stop
        self.arrived: dict[int, float] = {}  # cursor -> seconds from its commit to here
        self.connections = 0
        self.last: int | None = None

    def run(self) -> None:
        retry = 0.5
        while not self.stop.is_set():
            headers = {"Accept": "text/event-stream", "Authorization": f"Token {self.token}"}
            if self.last is not None:
                headers["Last-Event-ID"] = str(self.last)
            self.connections += 1
            try:
                with requests.get(self.url, headers=headers, stream=True, timeout=30) as r:
                    for line in r.iter_lines(decode_unicode=True):
                        if line.startswith("retry:"):
                            retry = int(line.split(":", 1)[1]) / 1000
                        elif line.startswith("id:"):
                            self.last = int(line.split(":", 1)[1])
                        elif line.startswith("data:") and self.last is not None:
                            at = json.loads(line[5:])["committed_at"].replace("Z", "+00:00")
                            self.arrived[self.last] = (
                                time.time() - datetime.fromisoformat(at).timestamp())
                        if self.stop.is_set():
                            return
            except requests.RequestException:
                pass
            self.stop.wait(retry)


def _subscribers(url: str, token: str, ns: Any, count: int) -> dict[str, Any]:
    from django.db import connection

    from memory.selectors.changes import last_cursor
    from memory.services import operation_apply

    start_after = last_cursor(ns.pk)
    stop = threading.Event()
    subs = [_Subscriber(f"{url}?after={start_after}", token, stop) for _ in range(count)]
    for s in subs:
        s.start()
    committed: list[int] = []
    other: list[float] = []
    deadline = time.monotonic() + RUN_SECONDS
    i = 0
    while time.monotonic() < deadline:
        operation_apply(namespace=ns, key=f"live{i % 20}", op="accept", value=f"x{i}",
                        actor="user:bench")
        committed.append(last_cursor(ns.pk))
        began = time.perf_counter()
        requests.get(url.split("/api/")[0] + "/api/v1/whoami/", timeout=30,
                     headers={"Authorization": f"Token {token}"})
        other.append(time.perf_counter() - began)
        i += 1
        time.sleep(WRITE_EVERY)
    time.sleep(4.0)  # the last events reach the subscribers over the cap (retry: 3 s)
    stop.set()
    for s in subs:
        s.join(timeout=35)
    connection.close()
    lags = sorted(s.arrived[c] for s in subs for c in committed if c in s.arrived)
    complete = sum(all(c in s.arrived for c in committed) for s in subs)
    return {"subscribers": count, "events": len(committed),
            "complete_subscribers": complete,
            "lag_p50_ms": round(statistics.median(lags) * 1000, 1) if lags else None,
            "lag_p95_ms": round(lags[int(len(lags) * 0.95)] * 1000, 1) if lags else None,
            "connections": sum(s.connections for s in subs),
            "other_request_p50_ms": round(statistics.median(other) * 1000, 1),
            "other_request_max_ms": round(max(other) * 1000, 1)}


def run(events: int, counts: list[int], out: Path) -> dict[str, Any]:
    _setup()
    from bench.servers import Stack
    from memory.services import namespace_create, token_create

    stamp = datetime.now().strftime("%Y%m%d%H%M%S")
    ns = namespace_create(name=f"bench-changes-{stamp}")
    token = token_create(namespace=ns, client="bench").key
    write = _write(ns, events)
    sys.stderr.write(f"changes: write {write}\n")
    stack = Stack(logs=out / "changes-logs", env={
        "PMEM_CHANGES_STREAMS": "2", "PMEM_CHANGES_STREAM_SECONDS": "60",
        "PMEM_CHANGES_KEEPALIVE": "15"}).start()
    try:
        base = f"{stack.url}/api/v1/namespaces/{ns.name}/"
        feed_items, feed_seconds = _read_all(base, token, "changes/?limit=1000")
        log_items, log_seconds = _read_all(base, token, "operations/?limit=500")
        read = {"feed_events": feed_items, "feed_seconds": round(feed_seconds, 2),
                "feed_events_per_second": round(feed_items / feed_seconds),
                "log_operations": log_items, "log_seconds": round(log_seconds, 2),
                "log_operations_per_second": round(log_items / log_seconds)}
        sys.stderr.write(f"changes: read {read}\n")
        rows = []
        for count in counts:
            row = _subscribers(f"{base}changes/", token, ns, count)
            rows.append(row)
            sys.stderr.write(f"changes: subscribers {row}\n")
    finally:
        stack.stop()
    body = {"write": write, "read": read, "subscribers": rows,
            "web": "gunicorn, 1 process, 4 gthread threads; PMEM_CHANGES_STREAMS=2"}
    out.mkdir(parents=True, exist_ok=True)
    (out / "changes.json").write_text(json.dumps(body, indent=2))
    (out / "changes.md").write_text(_table(body))
    _plot(rows, out / "changes.png")
    return body


def _table(body: dict[str, Any]) -> str:
    w, r = body["write"], body["read"]
    lines = [f"write ({w['events']:,} events an arm, commits of {FACTS_PER_OBSERVATION} facts):"
             f" {w['events_per_second_written']:,} events/s with the feed,"
             f" {w['events_per_second_without_feed']:,}/s without it: the feed costs"
             f" {w['feed_cost']:.1%}", "",
             f"read: the feed {r['feed_events_per_second']:,} events/s "
             f"({r['feed_events']:,} in {r['feed_seconds']} s); the operation log beside it "
             f"{r['log_operations_per_second']:,} operations/s", "",
             "| subscribers | events | got every event | lag p50 | lag p95 | connections |"
             " whoami p50 | whoami max |", "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s in body["subscribers"]:
        lines.append(f"| {s['subscribers']} | {s['events']} | {s['complete_subscribers']} |"
                     f" {s['lag_p50_ms']} ms | {s['lag_p95_ms']} ms | {s['connections']} |"
                     f" {s['other_request_p50_ms']} ms | {s['other_request_max_ms']} ms |")
    return "\n".join(lines) + "\n"


def _plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    xs = [r["subscribers"] for r in rows]
    left.plot(xs, [r["lag_p50_ms"] for r in rows], marker="o", label="p50")
    left.plot(xs, [r["lag_p95_ms"] for r in rows], marker="o", label="p95")
    right.plot(xs, [r["other_request_p50_ms"] for r in rows], marker="o", label="p50")
    right.plot(xs, [r["other_request_max_ms"] for r in rows], marker="o", label="max")
    for ax, title in ((left, "commit → subscriber lag, ms"),
                      (right, "an unrelated API request meanwhile, ms")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("SSE subscribers on one web process (2 streams held)")
        ax.set_title(title)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--subscribers", default="1,2,4,8,16")
    parser.add_argument("--out", type=Path, default=Path("bench/out"))
    args = parser.parse_args()
    print(_table(run(args.events, [int(c) for c in args.subscribers.split(",")], args.out)))
