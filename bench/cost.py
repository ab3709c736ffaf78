"""What the model-backed write path costs per observation: at most two chat calls and one
embedding batch, whatever the number of facts (README, "Cost").

Each observation goes through ``memory.services.observation_ingest`` — extraction, soft key
identity, batched annotation, commit and the embedding refresh, the code the Celery worker
runs — into a fresh namespace per facts-per-observation setting. Observation ``i`` carries
``f`` ``key = value`` facts; keys repeat every four observations, so about three in four facts
update a known key and the rest create one. Keys share no words, so an identity question
arises only when the embedder puts two of them close anyway (the scripted server's feature
hashing does, now and then, by collision): such calls are counted in their own column, and the
bound is checked on the rest.

Counts come from what the pipeline records on each observation (``Evidence.chat_calls``,
``embed_calls``, tokens) and, against the scripted server, also from the server's own request
log (``server_*`` columns) — the two must agree.

    from bench.cost import run_cost
    run_cost(out, server=scripted)                    # a scripted server the caller started
    run_cost(out, base_url="http://127.0.0.1:8001/v1", model="Qwen/Qwen3-4B-Instruct-2507")

Writes ``out/cost.json`` and ``out/cost.md``. Needs a migrated database with no transaction
open (the commit drain never runs inside one).
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from statistics import mean
from typing import Any

from django.conf import settings
from django.test import override_settings

from memory.llm.embedding import reset_embedder_cache
from memory.models import Operation
from memory.services import ExtractionFailed, namespace_create, observation_ingest

SCENARIO = "cost"
BOUND_CHAT = 2  # extraction + one batched annotation (identity calls counted apart)
BOUND_EMBED = 1  # one embedding batch: evidence text, keys, `key: value`s


def observation_text(i: int, n_facts: int) -> str:
    # A line of prose first: text the rule extractor understands whole never reaches the
    # model (SPEC §5.4), and this benchmark measures what the model path costs.
    lines = (f"fact{j}v{i % 4} = value {j} of observation {i}" for j in range(n_facts))
    return "\n".join((f"Notes of observation {i}, as told.", *lines))


@contextmanager
def _model(base_url: str | None, model: str | None, embed_base_url: str | None,
           server: Any = None) -> Iterator[Any]:
    """Settings pointing chat and embeddings at ``base_url``, or at ``server`` (an
    OpenAI-compatible server whose request log ``server.requests`` can be read, such as the
    tests' scripted one)."""
    if server is not None:
        base_url, model = server.base_url, server.model
    if base_url is None:
        raise ValueError("the cost benchmark needs a model endpoint (base_url) or a server")
    # A real endpoint embeds only where PMEM_EMBED_BASE_URL says (a chat server such as
    # llama.cpp's may serve no embeddings); the scripted server does both.
    embed_url = embed_base_url or (base_url if server is not None else "")
    overrides = {"PMEM_LLM_BASE_URL": base_url, "PMEM_LLM_MODEL": model or "default",
                 "PMEM_EMBED_BASE_URL": embed_url,
                 "PMEM_EMBED_MODEL": model or "default"}
    try:
        with override_settings(**overrides):
            reset_embedder_cache()
            yield server
    finally:
        reset_embedder_cache()


def _measure(n_observations: int, n_facts: int, server: Any) -> list[dict[str, Any]]:
    namespace = namespace_create(name=f"cost-f{n_facts}-{uuid.uuid4().hex[:8]}")
    rows = []
    for i in range(n_observations):
        before = len(server.requests) if server is not None else 0
        started = time.monotonic()
        try:
            evidence = observation_ingest(namespace=namespace,
                                          text=observation_text(i, n_facts), actor="bench:cost")
        except ExtractionFailed as exc:  # unreachable after its retries: a failed case
            rows.append({"state": "failed", "error": str(exc), "facts": n_facts,
                         "chat_calls": 0, "embed_calls": 0, "prompt_tokens": 0,
                         "completion_tokens": 0, "seconds": time.monotonic() - started})
            continue
        row = {
            "state": evidence.state, "error": evidence.error, "facts": n_facts,
            "operations": Operation.objects.filter(evidence=evidence).exclude(
                type="reinstate").count(),
            "chat_calls": evidence.chat_calls, "embed_calls": evidence.embed_calls,
            "prompt_tokens": evidence.prompt_tokens,
            "completion_tokens": evidence.completion_tokens,
            "seconds": time.monotonic() - started,
        }
        if server is not None:
            jobs = Counter(r.job for r in server.requests[before:])
            row.update(server_extraction=jobs["extraction"], server_annotation=jobs["annotation"],
                       server_identity=jobs["identity"], server_embeddings=jobs["embeddings"],
                       embed_inputs=sum(len(r.body.get("input") or [])
                                        for r in server.requests[before:]
                                        if r.job == "embeddings"))
        rows.append(row)
    return rows


def _summary(n_facts: int, rows: list[dict[str, Any]]) -> dict[str, Any]:
    def stat(name: str, fn: Any = mean) -> float | int | None:
        values = [r[name] for r in rows if name in r]
        return round(fn(values), 2) if values else None

    identity = [r.get("server_identity", 0) for r in rows]
    chat_without_identity = [r["chat_calls"] - i for r, i in zip(rows, identity, strict=True)]
    return {
        "arm": "commit", "status": "ok", "facts_per_observation": n_facts,
        "observations": len(rows),
        "committed": sum(r["state"] == "committed" for r in rows),
        "chat_calls_mean": stat("chat_calls"), "chat_calls_max": stat("chat_calls", max),
        "identity_calls": sum(identity),
        "embed_calls_mean": stat("embed_calls"), "embed_calls_max": stat("embed_calls", max),
        "embed_inputs_mean": stat("embed_inputs"),
        "prompt_tokens_mean": stat("prompt_tokens"),
        "completion_tokens_mean": stat("completion_tokens"),
        "tokens_per_fact": round(mean((r["prompt_tokens"] + r["completion_tokens"]) / n_facts
                                      for r in rows), 1) if rows else None,
        "failed": sum(r["state"] != "committed" for r in rows),
        "seconds_mean": stat("seconds"),
        "seconds_p50": _percentile([r["seconds"] for r in rows], 50),
        "seconds_p95": _percentile([r["seconds"] for r in rows], 95),
        "within_bound": all(c <= BOUND_CHAT for c in chat_without_identity)
        and all(r["embed_calls"] <= BOUND_EMBED for r in rows),
        "server_agrees": all(
            r["chat_calls"] == r["server_extraction"] + r["server_annotation"]
            + r["server_identity"] and r["embed_calls"] == r["server_embeddings"]
            for r in rows) if rows and "server_extraction" in rows[0] else None,
    }


def _percentile(values: list[float], pct: int) -> float | None:
    """Nearest-rank percentile, rounded to milliseconds."""
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[max(0, -(-pct * len(ordered) // 100) - 1)], 3)


COLUMNS = ("facts_per_observation", "observations", "committed", "failed", "chat_calls_mean",
           "chat_calls_max", "identity_calls", "embed_calls_mean", "embed_calls_max",
           "embed_inputs_mean", "prompt_tokens_mean", "completion_tokens_mean",
           "tokens_per_fact", "seconds_p50", "seconds_p95", "within_bound", "server_agrees")


def markdown(config: dict[str, Any], results: Sequence[dict[str, Any]]) -> str:
    lines = [f"## {SCENARIO}", "",
             f"model: {config.get('model')}; per observation: chat calls ≤ {BOUND_CHAT} "
             f"(+1 per ambiguous key), embedding calls ≤ {BOUND_EMBED}.", "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in results:
        lines.append("| " + " | ".join("—" if row.get(c) is None else str(row[c])
                                       for c in COLUMNS) + " |")
    return "\n".join(lines) + "\n"


def measure(n_observations: int = 50, facts_per_observation: Sequence[int] = (1, 5, 30), *,
            base_url: str | None = None, model: str | None = None,
            embed_base_url: str | None = None,
            server: Any = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(config, one summary row per facts setting); per-observation rows under ``rows``."""
    with _model(base_url, model, embed_base_url, server) as server:
        results = []
        for n_facts in facts_per_observation:
            rows = _measure(n_observations, n_facts, server)
            results.append({**_summary(n_facts, rows), "rows": rows})
    config = {"model": model or ("scripted" if server is not None else None),
              "base_url": base_url or "scripted server", "n_observations": n_observations,
              "facts_per_observation": list(facts_per_observation),
              "bound_chat": BOUND_CHAT, "bound_embed": BOUND_EMBED}
    return config, results


def run_cost(out_dir: Path | str, n_observations: int = 50,
             facts_per_observation: Sequence[int] = (1, 5, 30), *, base_url: str | None = None,
             model: str | None = None, embed_base_url: str | None = None,
             server: Any = None) -> str:
    """Run the benchmark; write ``out_dir/cost.json`` and ``out_dir/cost.md``; return the
    Markdown table."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    config, results = measure(n_observations, facts_per_observation, base_url=base_url,
                              model=model, embed_base_url=embed_base_url, server=server)
    (out / f"{SCENARIO}.json").write_text(json.dumps(
        {"scenario": SCENARIO, "config": config, "results": results}, indent=1, default=str))
    table = markdown(config, results)
    (out / f"{SCENARIO}.md").write_text(table)
    return table


def run_cost_scenario(config: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``bench.runners.SCENARIOS["cost"]``: ``--cases`` observations per setting (default 50)
    against the configured model (``--model-url``). Without one it says so: the benchmarks
    import nothing of the tests, the scripted server included (``tests/tasks`` runs this
    benchmark against it)."""
    client = getattr(config, "client", None)
    if client is None:
        return {"model": None, "scenario": SCENARIO}, [
            {"arm": "commit", "status": "needs a model: pass --model-url"}]
    run_config, results = measure(
        config.cases or 50, base_url=getattr(client, "base_url", None),
        model=getattr(client, "model", None),
        embed_base_url=settings.PMEM_EMBED_BASE_URL or None)
    return run_config, [{k: v for k, v in r.items() if k != "rows"} for r in results]
