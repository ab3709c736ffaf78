"""The explorer's part of ``pmem_bench history``: the cell page of a long key.

- **server**: the explorer's cell page (HTML) and the requests its scripts make on load (the
  graph window, the timeline), each timed in-process through Django's full request path
  (middleware, session, templates) with a logged-in reviewer: p50 / p95 and bytes;
- **chromium**: Debian's Chromium (Playwright) opens the page from a live server and reports
  when the first drawing of the graph reached the screen (``window.pmemGraph.drawnAt``:
  ``performance.now()`` in the animation frame after Cytoscape drew, i.e. milliseconds since
  navigation began), plus the wall time from ``goto`` to that moment as the harness saw it.

Functions the scenario calls per key; each returns plain dicts for the JSON report.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--no-first-run", "--disable-component-update", "--disable-sync"]
PASSWORD = "pw-bench-history"
GOAL_PAGE_MS = 150.0
GOAL_PAGE_BYTES = 200_000
GOAL_DRAWN_S = 1.5


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))
    return ordered[k]


def bench_user(namespace: Any) -> Any:
    """A reviewer of ``namespace`` (made once per namespace), who can log in."""
    from django.contrib.auth import get_user_model

    from memory.services import membership_set

    name = f"bench-{namespace.name}"[:150]
    user = get_user_model().objects.filter(username=name).first()
    if user is None:
        user = get_user_model().objects.create_user(username=name, password=PASSWORD)
        membership_set(namespace=namespace, user=user, role="reviewer")
    return user


def explorer_targets(namespace: Any, key: str) -> list[tuple[str, str, dict[str, str]]]:
    """(name, path, extra headers) of what opening the cell page costs the server."""
    base = f"/ns/{namespace.name}/cells/{key}/"
    return [("explorer cell page", base, {}),
            ("explorer graph window", base + "graph/", {"HTTP_ACCEPT": "application/json"}),
            ("explorer timeline", base + "timeline/", {"HTTP_ACCEPT": "application/json"}),
            ("explorer history page", base + "history/", {"HTTP_HX_REQUEST": "true"})]


def explorer_server_times(namespace: Any, key: str, *, repeats: int = 20,
                          warmup: int = 2) -> list[dict[str, Any]]:
    """p50 / p95 server time (ms) and bytes of the explorer's cell page and its requests."""
    from django.test import Client

    client = Client()
    client.force_login(bench_user(namespace))
    out = []
    for name, path, extra in explorer_targets(namespace, key):
        times: list[float] = []
        size = 0
        for i in range(warmup + repeats):
            start = time.perf_counter()
            response = client.get(path, **extra)
            elapsed = (time.perf_counter() - start) * 1000
            if response.status_code != 200:
                raise RuntimeError(f"{path}: HTTP {response.status_code}")
            size = len(response.content)
            if i >= warmup:
                times.append(elapsed)
        out.append({"target": name, "path": path, "p50_ms": statistics.median(times),
                    "p95_ms": _percentile(times, 0.95), "bytes": size, "runs": len(times)})
    return out


@contextmanager
def live_server() -> Iterator[str]:
    """The explorer served on a free local port in this process (static files from their
    finders, as the browser tests do), for Chromium to open."""
    from django.db import connections
    from django.test.testcases import LiveServerThread, _StaticFilesHandler

    thread = LiveServerThread("localhost", _StaticFilesHandler, port=0)
    thread.daemon = True
    thread.start()
    thread.is_ready.wait()
    if thread.error:
        raise thread.error
    try:
        yield f"http://localhost:{thread.port}"
    finally:
        thread.terminate()
        connections.close_all()


#: Bytes the page and everything it loaded by the time the graph was drawn (cache cleared).
_TRANSFERRED = """() => performance.getEntriesByType("navigation").concat(
    performance.getEntriesByType("resource")).reduce((n, e) => n + (e.transferSize || 0), 0)"""


def chromium_draw_times(namespace: Any, key: str, *, runs: int = 5) -> dict[str, Any]:
    """Seconds from navigation until Chromium shows the drawn graph of ``key``'s cell page:
    each run a fresh page (the session cookie kept, the HTTP cache cleared)."""
    if not os.access(CHROMIUM, os.X_OK):
        return {"skipped": "Debian's chromium is not installed (make browser-deps)"}
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    user = bench_user(namespace)
    drawn: list[float] = []
    seen: list[float] = []
    with live_server() as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1366, "height": 768})
        page = context.new_page()
        page.goto(base + "/accounts/login/")
        page.fill("#id_username", user.username)
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(base + "/")
        path = f"{base}/ns/{namespace.name}/cells/{key}/"
        for _ in range(runs + 1):  # the first run warms the server's caches; not counted
            session = context.new_cdp_session(page)
            session.send("Network.clearBrowserCache")
            start = time.perf_counter()
            page.goto(path, wait_until="commit")
            page.wait_for_function("() => window.pmemGraph && window.pmemGraph.drawnAt",
                                   timeout=60_000)
            seen.append(time.perf_counter() - start)
            drawn.append(page.evaluate("() => window.pmemGraph.drawnAt") / 1000)
            nodes = page.evaluate("() => window.pmemGraph.nodes")
            transferred = page.evaluate(_TRANSFERRED)
        browser.close()
    drawn, seen = drawn[1:], seen[1:]
    return {"target": "chromium: graph drawn after navigation", "path": path.replace(base, ""),
            "p50_s": statistics.median(drawn), "p95_s": _percentile(drawn, 0.95),
            "max_s": max(drawn), "harness_p50_s": statistics.median(seen), "nodes": nodes,
            "bytes": transferred,
            "runs": len(drawn), "goal_s": GOAL_DRAWN_S}


def explorer_measurements(namespace: Any, key: str, *, repeats: int = 20,
                          chromium_runs: int = 5, chromium: bool = True) -> dict[str, Any]:
    """Everything the explorer adds to one key's row of the history benchmark."""
    result: dict[str, Any] = {"server": explorer_server_times(namespace, key, repeats=repeats)}
    if chromium:
        result["chromium"] = chromium_draw_times(namespace, key, runs=chromium_runs)
    return result


# --- pmem_bench history (bench/history.py) ------------------------------------------------------


def register(history: Any) -> None:
    """Add the explorer's targets to ``pmem_bench history`` (its TARGETS and EXTRA hooks): the
    cell page (HTML, with its first page of history), the page at a cursor mid-history and as
    of mid-history, the graph window and the timeline its scripts fetch, and Chromium's time
    until the graph is drawn."""
    Target = history.Target
    history.TARGETS.extend([
        Target("explorer cell page", lambda c: _page(c), session=True),
        Target("explorer cell page, history mid-way",
               lambda c: _page(c) + f"?before={c.cell_id}-{c.middle.ordinal}", session=True),
        Target("explorer cell page as of mid-history",
               lambda c: _page(c) + f"?as_of={c.middle_time}", session=True,
               goal_ms=history.GOALS["as_of_p95_ms"]),
        Target("explorer graph window", lambda c: _page(c) + "graph/", session=True),
        Target("explorer timeline", lambda c: _page(c) + "timeline/", session=True,
               goal_ms=float("inf")),
    ])
    history.EXTRA.append(_chromium_row)


def _page(context: Any) -> str:
    return f"/ns/{context.namespace.name}/cells/{context.key}/"


def _chromium_row(context: Any, repeats: int) -> list[dict[str, Any]]:
    """Chromium's time until the drawn graph, as a row of the history report (ms)."""
    got = chromium_draw_times(context.namespace, context.key, runs=max(3, min(repeats, 5)))
    if "skipped" in got:
        return []
    p95_ms = got["p95_s"] * 1000
    return [{"target": "chromium: graph drawn after navigation", "versions": context.versions,
             "p50_ms": round(got["p50_s"] * 1000, 1), "p95_ms": round(p95_ms, 1),
             "bytes": got["bytes"], "goal_ms": GOAL_DRAWN_S * 1000, "goal_bytes": None,
             "met": p95_ms <= GOAL_DRAWN_S * 1000, "nodes": got["nodes"], "runs": got["runs"]}]
