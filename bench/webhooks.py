"""Webhook deliveries to a local receiver: ``python bench/webhooks.py [--backlog 1000]
[--observations 300] [--writers 4] [--workers 2]``.

On a PostgreSQL and Redis of its own (``PMEM_DATA_DIR=var/bench-webhooks`` unless set), with a
real gunicorn and a real Celery worker (:class:`bench.servers.Stack`) and a receiver on
127.0.0.1 (a thread of this process that answers 204 at once), it measures side by side in one
run:

- **throughput**: a backlog of ``--backlog`` committed events delivered to one endpoint from the
  moment it is resumed to the last 2xx (events/s; one at a time in cursor order, as deliveries
  go), and the same with the backlog split over four namespaces, one endpoint each (deliveries
  of different endpoints run in parallel);
- **lag under ingest**: ``--writers`` threads POSTing ``--observations`` observations (two facts
  each) to the API, with ``wait=0``; for every event, the seconds from its commit
  (``committed_at``) to its arrival at the receiver, p50/p95/max; and the API's ingest rate with
  the endpoint beside the rate without it (the cost of the wake-ups on the write path); then
  the same with one writer pausing 0.1 s between observations (a stream the worker keeps up
  with: the lag of delivery itself, not of the queue in front of it).

Writes ``bench/out/webhooks.json`` and ``bench/out/webhooks.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


class Receiver:
    """Records (arrival time, event) for each first delivery of a webhook id."""

    def __init__(self) -> None:
        self.arrived: dict[str, tuple[float, dict[str, Any]]] = {}
        self.requests = 0
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                now = time.time()
                with receiver.lock:
                    receiver.requests += 1
                    receiver.arrived.setdefault(self.headers["webhook-id"],
                                                (now, json.loads(body)))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def count(self, prefix: str = "") -> int:
        with self.lock:
            return sum(1 for k in self.arrived if k.startswith(prefix))

    def reset(self) -> None:
        with self.lock:
            self.arrived.clear()
            self.requests = 0


def _wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _backlog(receiver: Receiver, endpoints: int, events: int) -> dict[str, Any]:
    """``events`` events committed over ``endpoints`` namespaces while their endpoints are
    paused; then resumed at once; events/s until the last arrives."""
    from memory.models import WebhookEndpoint
    from memory.services import namespace_create, observations_ingest
    from memory.services.webhooks import webhook_create, webhook_resume

    made = []
    for n in range(endpoints):
        ns = namespace_create(name=f"hooks-backlog-{endpoints}-{n}-{os.getpid()}")
        endpoint = webhook_create(namespace=ns, url=receiver.url, actor="bench")
        WebhookEndpoint.objects.filter(pk=endpoint.pk).update(active=False)
        per = events // endpoints
        for start in range(0, per, 200):
            observations_ingest(namespace=ns, observations=[
                {"text": f"item_{i % 50} = value {i}"} for i in range(start, min(per, start + 200))])
        made.append((ns, endpoint))
    total = endpoints * (events // endpoints)
    receiver.reset()
    started = time.time()
    for _, endpoint in made:
        webhook_resume(endpoint=endpoint, actor="bench")
    _wait(lambda: receiver.count() >= total, 600, f"{total} backlog deliveries")
    last = max(t for t, _ in receiver.arrived.values())
    return {"endpoints": endpoints, "events": total, "seconds": round(last - started, 3),
            "events_per_s": round(total / (last - started), 1), "requests": receiver.requests}


def _ingest(stack: Any, token: str, ns: str, observations: int, writers: int,
            pause: float = 0.0) -> float:
    """POST the observations from ``writers`` threads; facts/s until the last is acknowledged
    and committed."""
    import requests

    from memory.models import Evidence

    counter = iter(range(observations))
    lock = threading.Lock()

    def write() -> None:
        session = requests.Session()
        session.headers["Authorization"] = f"Token {token}"
        url = f"{stack.url}/api/v1/namespaces/{ns}/observations/"
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            body = {"text": f"k{i % 20} = v{i}\nobs{i} = x{i}"}
            for _ in range(50):
                answer = session.post(url, json=body, timeout=30)
                if answer.status_code in (201, 202):
                    break
                time.sleep(0.2)
            time.sleep(pause)

    started = time.perf_counter()
    threads = [threading.Thread(target=write) for _ in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    _wait(lambda: not Evidence.objects.filter(namespace__name=ns,
                                              state__in=["pending", "processing"]).exists(),
          600, "the ingest to settle")
    return 2 * observations / (time.perf_counter() - started)


def _lag(stack: Any, receiver: Receiver, observations: int, writers: int,
         pause: float = 0.0) -> dict[str, Any]:
    from memory.models import ChangeEvent
    from memory.services import namespace_create, token_create
    from memory.services.webhooks import webhook_create

    out: dict[str, Any] = {}
    for arm in ("without_webhook", "with_webhook"):
        name = f"hooks-lag-{arm.replace('_', '-')}-{int(pause * 1000)}-{os.getpid()}"
        ns = namespace_create(name=name)
        token = token_create(namespace=ns, scope="write", name="bench", actor="bench").key
        if arm == "with_webhook":
            webhook_create(namespace=ns, url=receiver.url, actor="bench")
        receiver.reset()
        rate = _ingest(stack, token, ns.name, observations, writers, pause)
        out[f"ingest_facts_per_s_{arm}"] = round(rate, 1)
        if arm == "with_webhook":
            events = ChangeEvent.objects.filter(namespace=ns).count()
            _wait(lambda p=f"evt_{ns.pk}_", n=events: receiver.count(p) >= n, 600,
                  "every event delivered")
            lags = [t - datetime.fromisoformat(e["committed_at"].replace("Z", "+00:00"))
                    .timestamp() for t, e in receiver.arrived.values()]
            out.update(events=events, lags=lags, lag_p50_s=round(statistics.median(lags), 3),
                       lag_p95_s=round(_pct(lags, 0.95), 3), lag_max_s=round(max(lags), 3))
    return out


def _plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    labels = [f"{r['endpoints']} endpoint(s)" for r in result["throughput"]]
    left.bar(labels, [r["events_per_s"] for r in result["throughput"]], color="#2f6db3")
    left.set_ylabel("events/s delivered (backlog)")
    left.set_title("Webhook throughput to a local receiver")
    for arm, label, colour in (("lag", "burst: 4 writers, no pause", "#b35900"),
                               ("lag_paced", "paced: 1 writer, 0.1 s apart", "#2e7d32")):
        lags = sorted(result[arm]["lags"])
        right.plot(lags, [(i + 1) / len(lags) for i in range(len(lags))], color=colour,
                   label=f"{label} (p50 {result[arm]['lag_p50_s']} s, "
                         f"p95 {result[arm]['lag_p95_s']} s)")
    right.set_xscale("log")
    right.set_xlabel("seconds from commit to arrival (log)")
    right.set_ylabel("share of events")
    right.set_title("Delivery lag under API ingest")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backlog", type=int, default=1000)
    parser.add_argument("--observations", type=int, default=300)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    args = parser.parse_args()
    os.environ.setdefault("PMEM_DATA_DIR", str(ROOT / "var" / "bench-webhooks"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pmem_site.settings")
    os.environ["PMEM_WEBHOOK_ALLOW_PRIVATE"] = "1"
    os.environ.setdefault("PMEM_EMBEDDER", "hashing")
    import django

    from pmem_site import embedded

    embedded.start()
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from bench.servers import Stack

    receiver = Receiver()
    stack = Stack(logs=args.out / "webhooks-logs", workers=args.workers,
                  env={"PMEM_WEBHOOK_ALLOW_PRIVATE": "1"}).start()
    from pmem_site.celery import app

    app.conf.task_default_queue = stack.queue  # this process's wake-ups go to the stack
    try:
        result = {"config": vars(args) | {"out": str(args.out)},
                  "throughput": [_backlog(receiver, 1, args.backlog),
                                 _backlog(receiver, 4, args.backlog)],
                  "lag": _lag(stack, receiver, args.observations, args.writers),
                  "lag_paced": _lag(stack, receiver, args.observations // 3, 1, 0.1)}
    finally:
        stack.stop()
    args.out.mkdir(parents=True, exist_ok=True)
    _plot(result, args.out / "webhooks.png")
    for arm in ("lag", "lag_paced"):
        result[arm]["delivered"] = len(result[arm].pop("lags"))
    (args.out / "webhooks.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
