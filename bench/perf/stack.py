"""Ingest through the HTTP API (gunicorn) and a real Celery worker, and the FactConsolidation
stream end to end; peak RSS of both meanwhile."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import requests
from django.test import override_settings

from bench import servers
from bench.audit import stream_audit
from bench.scenarios import factconsolidation as fc
from memory.services import observation_ingest, observations_ingest, token_create

from .common import (
    FACTS_PER_OBSERVATION,
    GOALS,
    SCALES,
    Perf,
    fact_batch,
    flush_index,
    new_namespace,
    scalar,
    wal_lsn,
    wal_since,
)


class Stack(servers.Stack):
    """The perf section's gunicorn and two-process Celery worker (:class:`bench.servers.Stack`),
    logging under ``perf-logs``, with the rule extractor's ``patterns`` when given."""

    def __init__(self, perf: Perf, patterns: Path | None) -> None:
        super().__init__(logs=perf.out / "perf-logs", queue_prefix="pmem-perf",
                         env={"PMEM_RULE_PATTERNS": str(patterns or "")})


def _unsettled(namespace_id: int) -> int:
    return int(scalar("SELECT count(*) FROM memory_evidence WHERE namespace_id = %s AND"
                       " state IN ('pending', 'processing')", [namespace_id]))


def _post_all(stack: Stack, ns: Any, bodies: list[dict[str, Any]], perf: Perf,
              timeout: float = 1800.0) -> float:
    """POST every observation (wait=0), then wait until the worker committed them all;
    seconds from the first POST to the last commit."""


    token = token_create(namespace=ns, client="perf").key
    session = requests.Session()
    session.headers["Authorization"] = f"Token {token}"
    url = f"{stack.url}/api/v1/namespaces/{ns.name}/observations/"
    started = time.perf_counter()
    for i, body in enumerate(bodies):
        answer = session.post(url, json=body, timeout=60)
        if answer.status_code != 202:
            raise RuntimeError(f"POST answered {answer.status_code}: {answer.text[:300]}")
        if i % 20 == 0:
            perf.progress(perf.stage - 1, perf.stages)
    deadline = time.monotonic() + timeout
    while _unsettled(ns.pk):
        if time.monotonic() > deadline:
            raise RuntimeError(f"observations still unsettled after {timeout:.0f}s")
        time.sleep(0.05)
    elapsed = time.perf_counter() - started
    failed = int(scalar("SELECT count(*) FROM memory_evidence WHERE namespace_id = %s AND"
                         " state = 'failed'", [ns.pk]))
    if failed:
        raise RuntimeError(f"{failed} observations failed (see {stack.logs})")
    return elapsed


def _committed_facts(namespace_id: int) -> int:
    return int(scalar("SELECT count(*) FROM memory_operation WHERE namespace_id = %s AND"
                       " type <> 'reinstate'", [namespace_id]))


def api_and_stream(perf: Perf, services_seconds: float) -> None:


    scale = SCALES[perf.scale]
    patterns = perf.out / "perf-factconsolidation-patterns.json"
    patterns.write_text(json.dumps(fc.rule_pattern_entries(), indent=1))
    stack = Stack(perf, patterns).start()
    try:
        ns = new_namespace(perf, "api")
        n = scale.ingest_observations
        keys = n * FACTS_PER_OBSERVATION // 2
        lsn = wal_lsn()
        elapsed = _post_all(stack, ns, [
            {"facts": fact_batch("fact", i * 30, keys, i), "source": "perf"} for i in range(n)], perf)
        elapsed += flush_index(ns)  # what the worker left outside the frontier index
        wal = wal_since(lsn)
        facts = n * FACTS_PER_OBSERVATION
        rate = facts / elapsed
        perf.add("ingest", "API+worker facts/s", rate, "facts/s", goal=GOALS["api_facts_per_s"],
                 met=rate >= GOALS["api_facts_per_s"])
        perf.add("ingest", "API+worker WAL bytes per fact", wal / facts, "B")
        perf.add("ingest", "API+worker / services time ratio", elapsed / services_seconds, "x")
        perf.add("memory", "web RSS peak during API ingest", stack.peak["web"] / 2**20, "MiB")
        perf.add("memory", "worker RSS peak during API ingest (all processes)",
                 stack.peak["worker"] / 2**20, "MiB")

        perf.next_stage(f"scale run: {scale.stream_facts} FactConsolidation facts via API+worker")
        stream = fc.make_stream(scale.stream_facts, 10)
        pieces = [p for p in fc.chunks(stream) if p.strip()]
        stack.reset_peaks()
        ns = new_namespace(perf, "stream-api")
        elapsed = _post_all(stack, ns, [{"text": p, "source": "perf:fc"} for p in pieces], perf)
        elapsed += flush_index(ns)
        committed = _committed_facts(ns.pk)
        perf.add("scale", "stream facts", len(stream.facts), observations=len(pieces))
        perf.add("scale", "stream via API+worker seconds", elapsed, "s",
                 goal=GOALS["stream_seconds"], met=elapsed <= GOALS["stream_seconds"])
        perf.add("scale", "stream via API+worker facts/s", committed / elapsed, "facts/s")
        perf.add("scale", "stream operations committed", committed)
        audit = stream_audit(ns, stream)
        perf.add("scale", "stream gold_in_keyed_head (API+worker)", audit["gold_in_keyed_head"],
                 "%")
        perf.add("memory", "web RSS peak during scale run", stack.peak["web"] / 2**20, "MiB")
        perf.add("memory", "worker RSS peak during scale run (all processes)",
                 stack.peak["worker"] / 2**20, "MiB")
        perf.add("memory", "worker RSS peak during scale run (largest process)",
                 stack.peak["worker_max_process"] / 2**20, "MiB")
    finally:
        stack.stop()

    perf.say("scale run: the same stream in-process (services + rule extractor)")

    ns = new_namespace(perf, "stream-services")
    with override_settings(PMEM_RULE_PATTERNS=str(patterns)):
        started = time.perf_counter()
        for i, piece in enumerate(pieces):
            observation_ingest(namespace=ns, text=piece, source="perf:fc")
            if i % 20 == 0:
                perf.progress(perf.stage - 1, perf.stages)
        elapsed = time.perf_counter() - started + flush_index(ns)
    perf.add("scale", "stream via services seconds", elapsed, "s",
             goal=GOALS["stream_seconds"], met=elapsed <= GOALS["stream_seconds"])
    perf.add("scale", "stream via services facts/s", _committed_facts(ns.pk) / elapsed, "facts/s")


    ns = new_namespace(perf, "stream-import")
    with override_settings(PMEM_RULE_PATTERNS=str(patterns)):
        started = time.perf_counter()
        for first in range(0, len(pieces), 100):
            observations_ingest(namespace=ns, observations=[
                {"text": p, "source": "perf:fc"} for p in pieces[first:first + 100]])
            perf.progress(perf.stage - 1, perf.stages)
        elapsed = time.perf_counter() - started + flush_index(ns)
    perf.add("scale", "stream via services, group commit, seconds", elapsed, "s",
             goal=GOALS["stream_seconds"], met=elapsed <= GOALS["stream_seconds"])
    audit = stream_audit(ns, stream)
    perf.add("scale", "stream gold_in_keyed_head (group commit)", audit["gold_in_keyed_head"], "%")
