"""``pmem_bench history``: long histories and time travel (SPEC §9, §10).

One key per size (100, 1,000, 10,000 and 100,000 versions; ``--scale full`` adds 1,000,000;
``--scale small`` stops at 10,000), written with set-based SQL exactly as the commit writes it
(:mod:`bench.history_seed`), then each *target* — the cell API, a history page, a history page
deep in the past (cursor in the middle), a value search, the graph window, and the as-of cell,
history and graph — is requested ``REPEATS`` times in process through Django's full stack (URL
routing, auth, view, JSON); its *server time* is the request's wall time there (no network), its
size the answer's bytes. The frontier as of a past time is measured on a namespace of 100,000
keys (first page). Results: p50/p95 ms and bytes per target and size, the ratio of the largest
size's p95 to the 100-version key's, and the issue's goals met or not.

Extending it (the explorer branch does): append a :class:`Target` to :data:`TARGETS` (``session=
True`` requests it as a logged-in reviewer of the namespace, for explorer pages), or a function
to :data:`EXTRA` that takes the :class:`Context` of one size and returns result rows (e.g. the
time until Chromium has drawn the graph). Both run at every size.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.test import Client

from memory.models import Membership, Namespace, Version
from memory.services import namespace_create, token_create

from .history_seed import seed_cells, seed_key, without_fk_triggers

NAME = "history"
SIZES = {"small": (100, 1_000, 10_000), "medium": (100, 1_000, 10_000, 100_000),
         "full": (100, 1_000, 10_000, 100_000, 1_000_000)}
FRONTIER_CELLS = {"small": 10_000, "medium": 100_000, "full": 100_000}
REPEATS = {"small": 15, "medium": 30, "full": 30}
#: The issue's goals (at 100,000 versions; the ratio between 100 and 100,000).
GOALS = {"p95_ms": 150.0, "bytes": 200_000, "as_of_p95_ms": 250.0, "frontier_as_of_ms": 500.0,
         "ratio": 2.0}


@dataclass
class Context:
    """One size's key, and how to reach it."""

    namespace: Namespace
    key: str
    versions: int
    cell_id: int
    head_id: int
    middle: Version  # the version halfway through the history
    api: Client  # sends the namespace's token
    session: Client  # logged in as a reviewer of the namespace
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def base(self) -> str:
        return f"/api/v1/namespaces/{self.namespace.name}/cells/{self.key}/"

    @property
    def middle_time(self) -> str:
        return quote(self.middle.created_at.isoformat())


@dataclass(frozen=True)
class Target:
    name: str
    url: Callable[[Context], str]
    goal_ms: float = GOALS["p95_ms"]
    goal_bytes: int | None = int(GOALS["bytes"])
    session: bool = False  # an explorer page: requested with the logged-in session


TARGETS: list[Target] = [
    Target("cell API", lambda c: c.base),
    Target("history page", lambda c: c.base + "history/"),
    Target("history page, cursor mid-history",
           lambda c: c.base + f"history/?before={c.cell_id}-{c.middle.ordinal}"),
    Target("history value search", lambda c: c.base + "history/?search=position%2012"),
    Target("graph window", lambda c: c.base + "graph/"),
    Target("graph window around mid-history", lambda c: c.base + f"graph/?around={c.middle.id}"),
    Target("timeline (60 buckets)", lambda c: c.base + "timeline/", goal_ms=float("inf")),
    Target("as-of cell", lambda c: c.base + f"?as_of={c.middle_time}",
           goal_ms=GOALS["as_of_p95_ms"]),
    Target("as-of history page", lambda c: c.base + f"history/?as_of={c.middle_time}",
           goal_ms=GOALS["as_of_p95_ms"]),
    Target("as-of graph window", lambda c: c.base + f"graph/?as_of={c.middle_time}",
           goal_ms=GOALS["as_of_p95_ms"]),
]
#: Further measures per size: ``fn(context, repeats) -> [result rows]`` (see the module doc).
EXTRA: list[Callable[[Context, int], list[dict[str, Any]]]] = []


def _log(message: str) -> None:
    sys.stderr.write(f"[history] {message}\n")
    sys.stderr.flush()


def _timed(client: Client, url: str, repeats: int) -> tuple[list[float], int]:
    client.get(url)  # warm: the token's last use, the plans
    times, size = [], 0
    for _ in range(repeats):
        started = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - started) * 1000)
        if response.status_code != 200:
            raise RuntimeError(f"{url}: {response.status_code} {response.content[:200]!r}")
        size = len(response.content)
    return times, size


def _p95(times: list[float]) -> float:
    return sorted(times)[max(0, int(round(0.95 * len(times))) - 1)]


def measure(context: Context, target: Target, repeats: int) -> dict[str, Any]:
    client = context.session if target.session else context.api
    times, size = _timed(client, target.url(context), repeats)
    p95 = _p95(times)
    return {"target": target.name, "versions": context.versions,
            "p50_ms": round(statistics.median(times), 2), "p95_ms": round(p95, 2),
            "bytes": size, "goal_ms": target.goal_ms if target.goal_ms != float("inf") else None,
            "goal_bytes": target.goal_bytes,
            "met": p95 <= target.goal_ms and (target.goal_bytes is None
                                              or size <= target.goal_bytes)}


def _context(run_id: str, versions: int) -> Context:
    ns = namespace_create(name=f"bench-history-{run_id}-{versions}")
    _log(f"seeding one key with {versions:,} versions")
    started = time.perf_counter()
    cell = seed_key(ns, "robot_position", versions)
    with connection.cursor() as cur:
        cur.execute("ANALYZE memory_version; ANALYZE memory_versionspan; ANALYZE memory_cell;"
                    " ANALYZE memory_operation; ANALYZE memory_supportedge")
    _log(f"  seeded in {time.perf_counter() - started:.1f} s")
    api = Client(HTTP_AUTHORIZATION=f"Token {token_create(namespace=ns, client='bench').key}")
    user, _ = get_user_model().objects.get_or_create(username="bench-history")
    Membership.objects.get_or_create(namespace=ns, user=user,
                                     defaults={"role": Membership.Role.REVIEWER})
    session = Client()
    session.force_login(user)
    middle = Version.objects.get(cell=cell, ordinal=max(1, versions // 2))
    return Context(ns, cell.key, versions, cell.pk, cell.head_id or 0, middle, api, session)


def frontier_as_of(run_id: str, cells: int, repeats: int) -> dict[str, Any]:
    ns = namespace_create(name=f"bench-history-{run_id}-frontier")
    _log(f"seeding {cells:,} keys for the frontier as of a past time")
    between, _ = seed_cells(ns, cells)
    with connection.cursor() as cur:
        cur.execute("ANALYZE memory_cell; ANALYZE memory_version; ANALYZE memory_versionspan")
    api = Client(HTTP_AUTHORIZATION=f"Token {token_create(namespace=ns, client='bench').key}")
    url = f"/api/v1/namespaces/{ns.name}/cells/?as_of={quote(between.isoformat())}"
    times, size = _timed(api, url, repeats)
    p95 = _p95(times)
    _cleanup(ns)
    return {"target": "frontier as of a past time (first page)", "cells": cells,
            "versions": 2, "p50_ms": round(statistics.median(times), 2),
            "p95_ms": round(p95, 2), "bytes": size, "goal_ms": GOALS["frontier_as_of_ms"],
            "goal_bytes": None, "met": p95 <= GOALS["frontier_as_of_ms"]}


_CLEANUP = [
    "UPDATE memory_cell SET head_id = NULL WHERE namespace_id = %(ns)s",
    "UPDATE memory_operation SET version_id = NULL WHERE namespace_id = %(ns)s",
    "DELETE FROM memory_supportedge s USING memory_version v"
    " WHERE s.version_id = v.id AND v.namespace_id = %(ns)s",
    "DELETE FROM memory_versionspan s USING memory_version v"
    " WHERE s.version_id = v.id AND v.namespace_id = %(ns)s",
    "DELETE FROM memory_tombstone s USING memory_version v"
    " WHERE s.version_id = v.id AND v.namespace_id = %(ns)s",
    "DELETE FROM memory_version WHERE namespace_id = %(ns)s",
    "DELETE FROM memory_operation WHERE namespace_id = %(ns)s",
    "DELETE FROM memory_evidence WHERE namespace_id = %(ns)s",
    "DELETE FROM memory_frontiervector WHERE namespace_id = %(ns)s",
    "DELETE FROM memory_cell WHERE namespace_id = %(ns)s",
    "DELETE FROM memory_apitoken WHERE namespace_id = %(ns)s",
    "DELETE FROM memory_membership WHERE namespace_id = %(ns)s",
    "DELETE FROM memory_auditentry WHERE namespace_id = %(ns)s",
    "DELETE FROM memory_namespace WHERE id = %(ns)s",
]


def _cleanup(ns: Namespace) -> None:
    """The run's namespace goes again (a million rows are not left in a dev database), without
    the row-by-row foreign-key checks where the role may skip them (every row of the namespace
    goes: nothing outside it points in), which took minutes at commit for 100,000 keys."""
    with transaction.atomic(), connection.cursor() as cur, without_fk_triggers(cur):
        for sql in _CLEANUP:
            cur.execute(sql, {"ns": ns.pk})


def run(config: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    scale = getattr(config, "scale", None) or "medium"
    sizes, repeats = SIZES[scale], REPEATS[scale]
    run_id = config.run_id[-6:]
    results: list[dict[str, Any]] = []
    started = time.perf_counter()
    steps = len(sizes) * (len(TARGETS) + len(EXTRA)) + 1
    frontier = frontier_as_of(run_id, FRONTIER_CELLS[scale], repeats)
    _log(f"  frontier as of T at {FRONTIER_CELLS[scale]:,} keys: p95 {frontier['p95_ms']} ms")
    done = 1
    config.progress(done, steps)
    for versions in sizes:
        context = _context(run_id, versions)
        try:
            for target in TARGETS:
                row = measure(context, target, repeats)
                results.append(row)
                _log(f"  {versions:>9,} versions  {target.name:<34} p50 {row['p50_ms']:>7} ms"
                     f"  p95 {row['p95_ms']:>7} ms  {row['bytes']:>8,} B")
                done += 1
                config.progress(done, steps)
            for extra in EXTRA:
                results += extra(context, repeats)
                done += 1
                config.progress(done, steps)
        finally:
            _cleanup(context.namespace)
    results.append(frontier)
    config.progress(steps, steps)
    _ratios(results, sizes)
    with connection.cursor() as cur:
        cur.execute("SHOW server_version")
        postgres = cur.fetchone()[0]
    return {"run_id": config.run_id, "scale": scale, "sizes": list(sizes), "repeats": repeats,
            "goals": GOALS, "seconds": round(time.perf_counter() - started, 1),
            "machine": {"cpus": os.cpu_count(), "load_avg": os.getloadavg()},
            "postgres": postgres}, results


def _ratios(results: list[dict[str, Any]], sizes: tuple[int, ...]) -> None:
    """Each target's p95 at every size over its p95 at the smallest (the goal: < 2×)."""
    smallest = {r["target"]: r for r in results if r["versions"] == sizes[0] and "cells" not in r}
    for r in results:
        first = smallest.get(r["target"])
        if first is not None and "cells" not in r:
            r["ratio_to_smallest"] = round(r["p95_ms"] / max(first["p95_ms"], 0.01), 2)
            r["p50_ratio"] = round(r["p50_ms"] / max(first["p50_ms"], 0.01), 2)
            r["bytes_ratio"] = round(r["bytes"] / max(first["bytes"], 1), 2)


# --- report -----------------------------------------------------------------------------------


def write(out: Path, config: dict[str, Any], results: list[dict[str, Any]]) -> str:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{NAME}.json").write_text(json.dumps({"scenario": NAME, "config": config,
                                                  "results": results}, indent=1, default=str))
    table = markdown(config, results)
    (out / f"{NAME}.md").write_text(table)
    plot(out / f"{NAME}.png", config, results)
    return table


def markdown(config: dict[str, Any], results: list[dict[str, Any]]) -> str:
    sizes = config["sizes"]
    lines = [f"## history (scale {config['scale']})", "",
             f"PostgreSQL {config['postgres']}; {config['machine']['cpus']} CPUs, load average"
             f" at the end {config['machine']['load_avg']}; {config['repeats']} requests per"
             f" figure, in process (server time, no network); run took {config['seconds']} s.",
             "", "p50 / p95 ms (bytes) by versions on the key; ratio: the largest key's over"
             " the smallest's, p50 and p95.", "",
             "| target | " + " | ".join(f"{n:,}" for n in sizes) + " | ratio | goal |",
             "|---" * (len(sizes) + 3) + "|"]
    by: dict[str, dict[int, dict[str, Any]]] = {}
    for r in results:
        if "cells" not in r:
            by.setdefault(r["target"], {})[r["versions"]] = r
    for target, rows in by.items():
        cells = [f"{rows[n]['p50_ms']} / {rows[n]['p95_ms']} ({rows[n]['bytes']:,})"
                 if n in rows else "" for n in sizes]
        last = rows.get(sizes[-1], {})
        goal = _goal(last)
        lines.append(f"| {target} | " + " | ".join(cells) +
                     f" | {last.get('p50_ratio', '')}× / {last.get('ratio_to_smallest', '')}×"
                     f" | {goal} |")
    for r in results:
        if "cells" in r:
            lines += ["", f"{r['target']}, {r['cells']:,} keys: p50 {r['p50_ms']} ms,"
                          f" p95 {r['p95_ms']} ms, {r['bytes']:,} B — {_goal(r)}"]
    return "\n".join(lines) + "\n"


def _goal(row: dict[str, Any]) -> str:
    if not row or row.get("goal_ms") is None:
        return "—"
    bound = f"≤ {row['goal_ms']:g} ms" + (
        f", ≤ {row['goal_bytes'] // 1000} KB" if row.get("goal_bytes") else "")
    ratio = row.get("ratio_to_smallest")
    met = row["met"] and (ratio is None or ratio < GOALS["ratio"])
    return ("met" if met else "**not met**") + f" ({bound}, < {GOALS['ratio']:g}×)"


def plot(path: Path, config: dict[str, Any], results: list[dict[str, Any]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
    by: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        if "cells" not in r:
            by.setdefault(r["target"], []).append(r)
    for target, rows in by.items():
        rows.sort(key=lambda r: r["versions"])
        xs = [r["versions"] for r in rows]
        left.plot(xs, [r["p95_ms"] for r in rows], marker="o", label=target)
        right.plot(xs, [r["bytes"] / 1000 for r in rows], marker="o", label=target)
    left.axhline(GOALS["p95_ms"], color="grey", linestyle="--", linewidth=0.8)
    right.axhline(GOALS["bytes"] / 1000, color="grey", linestyle="--", linewidth=0.8)
    for ax, title, unit in ((left, "server time p95", "ms"), (right, "answer size", "KB")):
        ax.set_xscale("log")
        ax.set_xlabel("versions on the key")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
    left.legend(fontsize=7)
    fig.suptitle(f"pmem_bench history (scale {config['scale']}): time against history length")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# The explorer's pages and Chromium's drawing time (bench/history_explorer.py) join the run.
from . import history_explorer as _explorer  # noqa: E402

_explorer.register(sys.modules[__name__])

