"""``pmem_bench sessions``: conversations in, and many observations at once.

Two parts, each measured side by side in one run:

- **Sessions through a model.** The LoCoMo conversations (``--dataset``, default
  ``../shared/data/locomo/locomo10.json``; ``--cases`` conversations, default all) are
  ingested through the scripted model server of the benchmarks (:class:`bench.slow_model.
  SlowModel`, ``--latency`` seconds per chat call, default 0) two ways: one observation per
  session sent as ``messages`` (the paper's unit: one extraction call per session), and, for
  the first ``--turn-cases`` conversations (default 1), one text observation per turn (what a
  builder without ``messages`` did). Reported: chat calls per session (goal ≤ 1.2), prompt
  and completion tokens per session, sessions/s, and how many sessions were cut into chunks
  for the model's context.
- **Batch against one by one, no model.** ``--observations`` observations of 5 facts each
  (default 2,000) through the API's own stack in-process (DRF's test client: token auth,
  validation, the views, the services, PostgreSQL; no network): one ``POST observations/
  ?wait=1`` each, against ``POST observations/batch/?wait=1`` of 1,000 items each. The rounds
  (``--rounds``, default 2) alternate the two; the best round of each is reported, as facts/s.

Writes ``sessions.json``, ``sessions.md`` and ``sessions.png`` under ``--out``.
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.test import override_settings

from memory.domain.conversation import observation_text
from memory.llm.embedding import reset_embedder_cache
from memory.services import ExtractionFailed, namespace_create, observation_ingest, token_create

SCENARIO = "sessions"
#: ``../shared/data/locomo/`` beside the checkout (a worktree one level deeper looks further up).
_DATASETS = [root / "shared" / "data" / "locomo" / "locomo10.json"
             for root in Path(__file__).resolve().parents[2:4]]
DEFAULT_DATASET = next((p for p in _DATASETS if p.exists()), _DATASETS[0])
GOAL_CALLS_PER_SESSION = 1.2
FACTS = 5
BATCH = 1000


def _when(raw: str) -> datetime | None:
    """LoCoMo's session time (``1:56 pm on 8 May, 2023``), read as UTC (it names no zone)."""
    try:
        return datetime.strptime(raw.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    except ValueError:
        return None


def sessions_of(conversation: dict[str, Any]) -> list[tuple[datetime | None, list[dict[str, Any]]]]:
    """Each session of a LoCoMo conversation: its time, and its turns as ``messages`` (the
    speakers by name, the session's time on its first turn)."""
    out = []
    n = 1
    while f"session_{n}" in conversation:
        at = _when(conversation.get(f"session_{n}_date_time", ""))
        messages = [{"role": "user", "name": t["speaker"], "content": t["text"]}
                    for t in conversation[f"session_{n}"] if str(t.get("text", "")).strip()]
        if messages and at is not None:
            messages[0]["at"] = at.isoformat().replace("+00:00", "Z")
        if messages:
            out.append((at, messages))
        n += 1
    return out


def _turn_text(at: datetime | None, message: dict[str, Any]) -> str:
    """One turn as a text observation, as the LoCoMo runner sends it (``bench.datasets.
    locomo``): ``[time] speaker: text``. (A bare ``speaker: text`` line would read as a
    ``key: value`` fact to the rule extractor and never reach the model.)"""
    return f"[{at:%Y-%m-%d %H:%M} UTC] {message['name']}: {message['content']}" if at else \
        f"[?] {message['name']}: {message['content']}"


def _ingest_sessions(samples: list[dict[str, Any]], server: Any, *, per_turn: bool,
                     progress: Any) -> dict[str, Any]:
    before = server.stats() if server is not None else None
    calls = tokens_in = tokens_out = sessions = chunked = observations = failed = 0
    started = time.monotonic()
    for done, sample in enumerate(samples, start=1):
        ns = namespace_create(name=f"bench-sessions-{uuid.uuid4().hex[:8]}")
        for at, messages in sessions_of(sample["conversation"]):
            said = ([{"text": _turn_text(at, m)} for m in messages] if per_turn
                    else [{"text": observation_text("", messages), "messages": messages}])
            for item in said:
                try:
                    evidence = observation_ingest(namespace=ns, observed_at=at,
                                                  actor="bench:sessions", **item)
                except ExtractionFailed:  # a real model timing out: counted, not hidden
                    failed += 1
                    continue
                observations += 1
                calls += evidence.chat_calls
                tokens_in += evidence.prompt_tokens
                tokens_out += evidence.completion_tokens
                chunked += int(bool((evidence.extracted or {}).get("chunks")))
            sessions += 1
        progress(done, len(samples))
    seconds = time.monotonic() - started
    after = server.stats() if server is not None else None
    return {
        "arm": "per turn (text)" if per_turn else "per session (messages)",
        "conversations": len(samples), "sessions": sessions, "observations": observations,
        "chat_calls_per_session": round(calls / max(sessions, 1), 3),
        "server_chat_calls_per_session": round(
            (after["chat_calls"] - before["chat_calls"]) / max(sessions, 1), 3)
        if after is not None and before is not None else None,
        "prompt_tokens_per_session": round(tokens_in / max(sessions, 1), 1),
        "completion_tokens_per_session": round(tokens_out / max(sessions, 1), 1),
        "sessions_per_s": round(sessions / seconds, 2), "seconds": round(seconds, 2),
        "sessions_chunked": chunked, "observations_failed": failed,
    }


def _model_part(config: Any, samples: list[dict[str, Any]], latency: float,
                turn_cases: int) -> list[dict[str, Any]]:
    from .slow_model import SlowModel

    server = SlowModel(latency=latency, in_flight=8, model="scripted").start()
    try:
        with override_settings(PMEM_LLM_BASE_URL=server.base_url, PMEM_LLM_MODEL=server.model):
            reset_embedder_cache()
            rows = [_ingest_sessions(samples, server, per_turn=False, progress=config.progress)]
            rows.append(_ingest_sessions(samples[:turn_cases], server, per_turn=True,
                                         progress=config.progress))
            # The same conversations both ways, for the ratio.
            rows.append({**_ingest_sessions(samples[:turn_cases], server, per_turn=False,
                                            progress=config.progress),
                         "arm": "per session (messages), same conversations"})
    finally:
        server.close()
        reset_embedder_cache()
    return rows


def _endpoint_part(config: Any, samples: list[dict[str, Any]], url: str,
                   model: str | None) -> list[dict[str, Any]]:
    """The first conversation per session through a real endpoint (``--model-url``: the
    bundled SmolLM2 behind llama.cpp's server, or vLLM): what it costs in calls and tokens
    there. Its answers are not judged (a 135M model extracts badly); only the cost is."""
    with override_settings(PMEM_LLM_BASE_URL=url, PMEM_LLM_MODEL=model or "default"):
        reset_embedder_cache()
        try:
            row = _ingest_sessions(samples[:1], None, per_turn=False, progress=config.progress)
        finally:
            reset_embedder_cache()
    return [{**row, "arm": f"per session (messages), {model or url}"}]


def _items(n: int, round_: int) -> list[dict[str, Any]]:
    return [{"facts": [{"key": f"thing_{(i * FACTS + j) % 400}", "value": f"v{round_}-{i}-{j}"}
                       for j in range(FACTS)]} for i in range(n)]


def _api_part(n: int, rounds: int) -> list[dict[str, Any]]:
    from rest_framework.test import APIClient

    best: dict[str, float] = {}
    for round_ in range(rounds):
        for arm in ("one by one", "batch") if round_ % 2 == 0 else ("batch", "one by one"):
            ns = namespace_create(name=f"bench-batch-{uuid.uuid4().hex[:8]}")
            api = APIClient()
            api.credentials(HTTP_AUTHORIZATION=f"Token {token_create(namespace=ns).key}")
            base = f"/api/v1/namespaces/{ns.name}/observations/"
            items = _items(n, round_)
            started = time.monotonic()
            if arm == "batch":
                for at in range(0, n, BATCH):
                    answer = api.post(f"{base}batch/?wait=1", json.dumps(
                        {"observations": items[at:at + BATCH]}), content_type="application/json")
                    assert answer.status_code == 201, answer.content[:300]
            else:
                for item in items:
                    answer = api.post(f"{base}?wait=1", json.dumps(item),
                                      content_type="application/json")
                    assert answer.status_code == 201, answer.content[:300]
            rate = n * FACTS / (time.monotonic() - started)
            best[arm] = max(best.get(arm, 0.0), rate)
    return [{"arm": f"API, {arm}", "observations": n, "facts": n * FACTS,
             "facts_per_s": round(best[arm], 1),
             "ratio_to_one_by_one": round(best[arm] / best["one by one"], 2)}
            for arm in ("one by one", "batch")]


def run(config: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    options = config.throughput or {}
    dataset = Path(config.dataset) if config.dataset else DEFAULT_DATASET
    samples = json.loads(dataset.read_text())
    if config.cases:
        samples = samples[:config.cases]
    latency = float(options.get("latency") or 0.0)
    turn_cases = int(options.get("turn_cases") or 1)
    n = int(options.get("batch_observations") or 2000)
    rounds = int(options.get("rounds") or 2)
    with override_settings(PMEM_LLM_BASE_URL=None):
        rows = _api_part(n, rounds)  # no model: the write path's own cost
    rows = _model_part(config, samples, latency, turn_cases) + rows
    if options.get("model_url"):
        rows = rows[:3] + _endpoint_part(config, samples, options["model_url"],
                                         options.get("model")) + rows[3:]
    run_config = {"run_id": config.run_id, "dataset": str(dataset), "latency_s": latency,
                  "model": "scripted (bench.slow_model)", "embedder": "hashing",
                  "goal_chat_calls_per_session": GOAL_CALLS_PER_SESSION,
                  "batch_size": BATCH, "facts_per_observation": FACTS, "rounds": rounds}
    return run_config, rows


# --- report ------------------------------------------------------------------------------------

SESSION_COLUMNS = ("arm", "conversations", "sessions", "observations", "chat_calls_per_session",
                   "server_chat_calls_per_session", "prompt_tokens_per_session",
                   "completion_tokens_per_session", "sessions_per_s", "sessions_chunked",
                   "observations_failed")
BATCH_COLUMNS = ("arm", "observations", "facts", "facts_per_s", "ratio_to_one_by_one")


def _table(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> list[str]:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(r.get(c, "—")) for c in columns) + " |" for r in rows]
    return lines


def markdown(config: dict[str, Any], results: list[dict[str, Any]]) -> str:
    sessions = [r for r in results if "sessions" in r]
    batches = [r for r in results if "facts_per_s" in r]
    return "\n".join([
        f"## {SCENARIO}", "",
        f"Model: {config['model']}, {config['latency_s']} s a chat call; goal ≤ "
        f"{config['goal_chat_calls_per_session']} chat calls per session.", "",
        *_table(sessions, SESSION_COLUMNS), "",
        f"No model, {config['facts_per_observation']} facts an observation, best of "
        f"{config['rounds']} alternating rounds:", "",
        *_table(batches, BATCH_COLUMNS), ""])


def write(out: Path, config: dict[str, Any], results: list[dict[str, Any]]) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    (out / f"{SCENARIO}.json").write_text(json.dumps(
        {"scenario": SCENARIO, "config": config, "results": results}, indent=1, default=str))
    table = markdown(config, results)
    (out / f"{SCENARIO}.md").write_text(table)
    sessions = [r for r in results if "sessions" in r]
    batches = [r for r in results if "facts_per_s" in r]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    names = [r["arm"].replace(", same conversations", "\n(same conv.)") for r in sessions]
    left.bar(names, [r["chat_calls_per_session"] for r in sessions], color="#4878a8")
    left.axhline(GOAL_CALLS_PER_SESSION, color="#c44", linestyle="--", label="goal ≤ 1.2")
    left.set_ylabel("chat calls per session")
    left.set_title("LoCoMo per session: chat calls")
    left.legend()
    left.tick_params(axis="x", labelsize=7)
    right.bar([r["arm"].replace("API, ", "") for r in batches],
              [r["facts_per_s"] for r in batches], color="#6a9f58")
    right.set_ylabel("facts/s (no model)")
    right.set_title("observations/batch/ against one by one")
    fig.tight_layout()
    fig.savefig(out / f"{SCENARIO}.png", dpi=110)
    plt.close(fig)
    return table
