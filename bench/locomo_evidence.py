"""``pmem_bench locomo_evidence``: does a read find what was said? LoCoMo's evidence retrieval
(snap-research, CC BY-NC 4.0: evaluation only, never shipped), no model.

Each of the 10 conversations goes into a namespace of its own, one observation per turn
(``Speaker: text``), each carrying one fact for the keyed frontier (``turn_d<session>_<n>``,
the same text). The 1,540 questions of categories 1-4 are read in ``raw`` (cosine over the
observations), ``evidence`` (the cosine fused with PostgreSQL full text search) and
``frontier`` (the hybrid read over the facts), beside BM25 (rank_bm25's Okapi, over the same
turns, words as lower-case letters and digits). Scored by our own scorer over the dataset's
evidence ids: turn any@k (one of the question's evidence turns among the first k) and session
any@k (one of its sessions among the first k turns' sessions); read latency p50 / p95 of each
P-Mem read in-process, the query's embedding made once before them and timed apart. The evidence read's fusion is also ranked
other ways from the same candidates (its words alone, other weights, reciprocal rank fusion),
to show where its weight stands, and with the ``simple`` text search configuration instead
of the index's ``english``.
"""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from statistics import median
from typing import Any

import matplotlib
from django.test import override_settings

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from memory.domain.ranking import RRF_K  # noqa: E402
from memory.llm.embedding import embedder_id  # noqa: E402
from memory.models import Cell, Evidence, Namespace  # noqa: E402
from memory.reads import read  # noqa: E402
from memory.selectors.evidence import Candidate, evidence_candidates, evidence_read  # noqa: E402
from memory.selectors.search import query_vector  # noqa: E402
from memory.services import namespace_create, observations_ingest  # noqa: E402
from memory.services.embeddings import embeddings_wait  # noqa: E402

NAME = "locomo_evidence"
DEFAULT_DATASET = Path("../shared/data/locomo/locomo10.json")
SCORED_CATEGORIES = (1, 2, 3, 4)
K = 10
TURN_KS, SESSION_KS = (1, 5, 10), (5, 10)
MODES = ("raw", "evidence", "frontier")
#: The evidence read over the session arm: each session one observation with its messages,
#: scored by the turns its items name.
SESSIONS = "evidence over sessions"
#: The issue's held-out goal for ``evidence`` (besides beating BM25 at every k).
GOALS = {"turn_any@5": 0.58, "session_any@10": 0.90, "p50_ms": 40.0}
#: Other fusions of the evidence read's candidates: the lexical weight (its default is 1.0),
#: or reciprocal rank fusion.
VARIANTS: dict[str, Any] = {"words alone": None, "weight 0.5": 0.5, "weight 2": 2.0,
                            "rrf": "rrf"}
QUERY = "query embedding"
#: The same read with the ``simple`` text search configuration (no stemming, no stop words).
SIMPLE = "simple configuration"
_WORD = re.compile(r"[^\W_]+")


def _tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _turns(conversation: dict[str, Any]) -> list[tuple[str, str]]:
    """``(dia_id, "Speaker: text")`` of every turn, in order."""
    out, n = [], 1
    while f"session_{n}" in conversation:
        out += [(t["dia_id"], f"{t['speaker']}: {t['text']}") for t in conversation[f"session_{n}"]]
        n += 1
    return out


def _sessions(conversation: dict[str, Any]) -> list[tuple[list[str], list[dict[str, Any]]]]:
    """Each session as one chat session: its turns' dia ids, and its ``messages`` (the
    speaker as the name, the session's date as every message's time where it parses)."""
    out, n = [], 1
    while f"session_{n}" in conversation:
        turns = conversation[f"session_{n}"]
        at = _session_time(conversation.get(f"session_{n}_date_time", ""))
        speakers = list(dict.fromkeys(t["speaker"] for t in turns))
        out.append(([t["dia_id"] for t in turns], [
            {"role": "user" if speakers.index(t["speaker"]) == 0 else "assistant",
             "name": t["speaker"], "content": t["text"], **({"at": at} if at else {})}
            for t in turns]))
        n += 1
    return out


def _session_time(text: str) -> str | None:
    """LoCoMo's ``1:56 pm on 8 May, 2023`` as ISO 8601 (None if it does not parse)."""
    try:
        moment = datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC).isoformat().replace("+00:00", "Z")


def _evidence_ids(qa: dict[str, Any]) -> set[str]:
    """The question's evidence turns (a few entries hold several, split by ';' or ',')."""
    return {part.strip() for entry in qa.get("evidence", [])
            for part in re.split(r"[;,]", entry) if part.strip()}


def _session(dia_id: str) -> str:
    return dia_id.split(":")[0]


def _score(ranked: list[str], gold: set[str]) -> dict[str, bool]:
    sessions = {_session(g) for g in gold}
    hit = {f"turn_any@{k}": bool(gold & set(ranked[:k])) for k in TURN_KS}
    hit |= {f"session_any@{k}": bool(sessions & {_session(d) for d in ranked[:k]})
            for k in SESSION_KS}
    return hit


def _ingest(name: str, turns: list[tuple[str, str]],
            keyed: bool) -> tuple[Any, dict[int, str], dict[str, str]]:
    namespace = namespace_create(name=name)
    keys = {f"turn_{dia.lower().replace(':', '_')}": dia for dia, _ in turns} if keyed else {}
    rows = observations_ingest(namespace=namespace, observations=[
        {"text": text, "source": "locomo",
         **({"facts": [{"key": f"turn_{dia.lower().replace(':', '_')}", "value": text}]}
            if keyed else {})}
        for dia, text in turns])
    return namespace, {e.pk: dia for e, (dia, _) in zip(rows, turns, strict=True)}, keys


def _reused(name: str, turns: list[tuple[str, str]]
            ) -> tuple[Any, dict[int, str], dict[str, str]] | None:
    """The namespace an earlier run ingested this conversation into, if it holds every turn
    with its embedding (its turns in seq order), and its facts' keys if it has them."""
    namespace = Namespace.objects.filter(name=name).first()
    if namespace is None:
        return None
    rows = list(Evidence.objects.filter(namespace=namespace).order_by("seq")
                .values_list("id", "text", "embedding"))
    if len(rows) != len(turns) or any(v is None for *_, v in rows):
        return None
    assert all(text == t for (_, text, _), (_, t) in zip(rows, turns, strict=True))
    keys = {f"turn_{dia.lower().replace(':', '_')}": dia for dia, _ in turns}
    keyed = Cell.objects.filter(namespace=namespace, key__in=list(keys)[:1]).exists()
    return (namespace, {i: dia for (i, _, _), (dia, _) in zip(rows, turns, strict=True)},
            keys if keyed else {})


def _ingest_sessions(name: str, sessions: list[tuple[list[str], list[dict[str, Any]]]]
                     ) -> tuple[Any, dict[tuple[int, int], str]]:
    """Each session one observation with its ``messages``; ``(observation, message number)``
    of every turn -> its dia id."""
    namespace = namespace_create(name=name)
    rows = observations_ingest(namespace=namespace, observations=[
        {"messages": messages, "source": "locomo"} for _, messages in sessions])
    return namespace, {(e.pk, n): dia for e, (dias, _) in zip(rows, sessions, strict=True)
                       for n, dia in enumerate(dias, start=1)}


def _reused_sessions(name: str, sessions: list[tuple[list[str], list[dict[str, Any]]]]
                     ) -> tuple[Any, dict[tuple[int, int], str]] | None:
    namespace = Namespace.objects.filter(name=name).first()
    if namespace is None:
        return None
    ids = list(Evidence.objects.filter(namespace=namespace).order_by("seq")
               .values_list("id", flat=True))
    if len(ids) != len(sessions):
        return None
    return namespace, {(i, n): dia for i, (dias, _) in zip(ids, sessions, strict=True)
                       for n, dia in enumerate(dias, start=1)}


def _turns_of_sessions(items: list[dict[str, Any]],
                       by_message: dict[tuple[int, int], str]) -> list[str]:
    """The turns an evidence read of the session arm names, best first: every message its
    items name, by its own score (an item's messages come in the session's order)."""
    named = [(m["score"], place, by_message.get((i["id"], m["index"]), ""))
             for place, i in enumerate(items) for m in i.get("messages", [])]
    return [dia for _, _, dia in sorted(named, key=lambda t: (-t[0], t[1]))]


def _variant(rows: list[Candidate], how: Any) -> list[int]:
    if how == "rrf":
        fused = {r.evidence_id: 0.0 for r in rows}
        for side in ("semantic", "lexical"):
            listed = sorted((r for r in rows if getattr(r, side)),
                            key=lambda r: -float(getattr(r, side) or 0))
            for place, r in enumerate(listed, start=1):
                fused[r.evidence_id] += 1 / (RRF_K + place)
        return sorted(fused, key=lambda i: -fused[i])[:K]
    weight = 1.0 if how is None else float(how)

    def fused(row: Candidate) -> float:
        return (0.0 if how is None else (row.semantic or 0.0)) + weight * row.lexical

    return [r.evidence_id for r in sorted(rows, key=fused, reverse=True)[:K]]


def run(config: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    from rank_bm25 import BM25Okapi

    dataset = config.dataset or DEFAULT_DATASET
    samples = json.loads(Path(dataset).read_text())[: config.cases or None]
    hits: dict[str, list[dict[str, bool]]] = {m: [] for m in ("bm25", *MODES, SESSIONS,
                                                                *VARIANTS, SIMPLE)}
    latency: dict[str, list[float]] = {m: [] for m in (*MODES, SESSIONS, QUERY)}
    ingest_s = embed_s = 0.0
    keyed_upto = config.frontier_conversations
    scored = keyed_count = 0
    for done, sample in enumerate(samples, start=1):
        turns = _turns(sample["conversation"])
        keyed = keyed_upto is None or done <= keyed_upto
        started = time.perf_counter()
        if config.reuse_run:
            found = _reused(f"bench-{NAME}-{config.reuse_run}-{sample['sample_id']}".lower(),
                            turns)
            if found is None:
                break  # that run stopped before this conversation: score those before it
            namespace, by_evidence, by_key = found
            keyed = bool(by_key)
        else:
            # Embedded right after the commit, in this thread: the background embedder runs
            # at a lower priority, which a loaded host starves, and every mode reads every
            # vector.
            with override_settings(PMEM_EMBED_ASYNC=False):
                namespace, by_evidence, by_key = _ingest(
                    f"bench-{NAME}-{config.run_id}-{sample['sample_id']}".lower(), turns, keyed)
        sessions = _sessions(sample["conversation"])
        again = None
        if config.reuse_run:
            again = _reused_sessions(
                f"bench-{NAME}-{config.reuse_run}-{sample['sample_id']}-sessions".lower(),
                sessions)
        if again is None:
            with override_settings(PMEM_EMBED_ASYNC=False):
                again = _ingest_sessions(
                    f"bench-{NAME}-{config.run_id}-{sample['sample_id']}-sessions".lower(),
                    sessions)
        session_namespace, by_message = again
        scored += 1
        keyed_count += keyed
        ingest_s += time.perf_counter() - started
        started = time.perf_counter()
        embeddings_wait(timeout=3600)
        embed_s += time.perf_counter() - started
        bm25 = BM25Okapi([_tokens(text) for _, text in turns])
        for qa in sample["qa"]:
            gold = _evidence_ids(qa)
            if qa.get("category") not in SCORED_CATEGORIES or not gold:
                continue
            question = qa["question"]
            scores = bm25.get_scores(_tokens(question))
            order = sorted(range(len(turns)), key=lambda i: -scores[i])[:K]
            hits["bm25"].append(_score([turns[i][0] for i in order], gold))
            started = time.perf_counter()
            # Embedded once and remembered (the embedder keeps recent queries): each mode's
            # read is timed without it, so no mode pays it for the others.
            query_vector(namespace, question)
            latency[QUERY].append(1000 * (time.perf_counter() - started))
            for mode in MODES:
                if mode == "frontier" and not keyed:
                    continue
                started = time.perf_counter()
                items = read(mode, namespace=namespace, query=question, k=K).items
                latency[mode].append(1000 * (time.perf_counter() - started))
                ranked = ([by_key.get(i["key"], "") for i in items] if mode == "frontier"
                          else [by_evidence.get(i["id"], "") for i in items])
                hits[mode].append(_score(ranked, gold))
            started = time.perf_counter()
            items = read("evidence", namespace=session_namespace, query=question, k=K).items
            latency[SESSIONS].append(1000 * (time.perf_counter() - started))
            hits[SESSIONS].append(_score(_turns_of_sessions(items, by_message), gold))
            rows = evidence_candidates(namespace=namespace, query=question, k=K)
            for label, how in VARIANTS.items():
                hits[label].append(_score([by_evidence[i] for i in _variant(rows, how)], gold))
            simple = evidence_candidates(namespace=namespace, query=question, k=K,
                                         config="simple")
            hits[SIMPLE].append(_score([by_evidence[i] for i in _variant(simple, 1.0)], gold))
        config.progress(done, len(samples))
        # What is done so far, written after each conversation: a run stopped short still
        # leaves its table.
        write(config.out, _config(config, dataset, scored, keyed_count, latency, ingest_s,
                                  embed_s), [_row(arm, rows, latency.get(arm, []))
                                             for arm, rows in hits.items()])
    cfg = _config(config, dataset, scored, keyed_count, latency, ingest_s, embed_s)
    return cfg, [_row(arm, rows, latency.get(arm, [])) for arm, rows in hits.items()]


def _config(config: Any, dataset: Path, scored: int, keyed_count: int,
            latency: dict[str, list[float]], ingest_s: float, embed_s: float) -> dict[str, Any]:
    return {"run_id": config.run_id, "dataset": str(dataset), "embedder": embedder_id(),
            "conversations": scored, "k": K, "reused_run": config.reuse_run,
            "frontier_conversations": keyed_count,
            "query_embedding_p50_ms": round(median(latency[QUERY]), 1) if latency[QUERY] else None,
            "categories": list(SCORED_CATEGORIES),
            "ingest_s": round(ingest_s, 1), "embed_wait_s": round(embed_s, 1),
            "goals": GOALS, "read": evidence_read.__module__}


def _row(arm: str, rows: list[dict[str, bool]], ms: list[float]) -> dict[str, Any]:
    row: dict[str, Any] = {"arm": arm, "n": len(rows),
                           "kind": "variant" if arm in (*VARIANTS, SIMPLE) else "read"}
    for metric in (*(f"turn_any@{k}" for k in TURN_KS),
                   *(f"session_any@{k}" for k in SESSION_KS)):
        row[metric] = round(sum(r[metric] for r in rows) / len(rows), 3) if rows else None
    if ms:
        ordered = sorted(ms)
        row["p50_ms"] = round(median(ordered), 1)
        row["p95_ms"] = round(ordered[int(0.95 * (len(ordered) - 1))], 1)
    return row


_METRICS = ("turn_any@1", "turn_any@5", "turn_any@10", "session_any@5", "session_any@10")


def markdown(config: dict[str, Any], results: list[dict[str, Any]]) -> str:
    head = "| read | n | " + " | ".join(_METRICS) + " | read p50 / p95 |"
    lines = [f"LoCoMo evidence retrieval, {config['conversations']} conversations (frontier: "
             f"the first {config['frontier_conversations']}), embedder {config['embedder']}; "
             f"read times without the query's embedding (p50 "
             f"{config['query_embedding_p50_ms']} ms, once per question)", "",
             head, "|" + " --- |" * (len(_METRICS) + 3)]
    for r in results:
        arm = r["arm"] if r["kind"] == "read" else f"evidence fused: {r['arm']}"
        timing = f"{r['p50_ms']} / {r['p95_ms']} ms" if "p50_ms" in r else "—"
        lines.append(f"| {arm} | {r['n']} | " + " | ".join(f"{r[m]:.3f}" for m in _METRICS)
                     + f" | {timing} |")
    by = {r["arm"]: r for r in results}
    ev, bm = by["evidence"], by["bm25"]
    ahead = all(ev[m] > bm[m] for m in _METRICS)
    lines += ["", f"evidence ahead of BM25 at every k: {'yes' if ahead else 'NO'}; "
              f"turn any@5 {ev['turn_any@5']:.3f} (goal ≥ {GOALS['turn_any@5']}), session "
              f"any@10 {ev['session_any@10']:.3f} (goal ≥ {GOALS['session_any@10']}), read p50 "
              f"{ev['p50_ms']} ms (goal ≤ {GOALS['p50_ms']:.0f})",
              f"ingest and embedding {config['ingest_s']} s"]
    return "\n".join(lines) + "\n"


def plot(path: Path, results: list[dict[str, Any]]) -> None:
    reads = [r for r in results if r["kind"] == "read"]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.8 / len(reads)
    for n, r in enumerate(reads):
        xs = [i + n * width for i in range(len(_METRICS))]
        fewer = f" ({r['n']} questions)" if r["n"] < max(x["n"] for x in reads) else ""
        ax.bar(xs, [r[m] for m in _METRICS], width, label=r["arm"] + fewer)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(_METRICS))], _METRICS)
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of questions")
    ax.set_title("LoCoMo evidence retrieval: a read's first k turns hold an evidence turn")
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write(out: Path, config: dict[str, Any], results: list[dict[str, Any]]) -> str:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{NAME}.json").write_text(json.dumps({"scenario": NAME, "config": config,
                                                  "results": results}, indent=1, default=str))
    table = markdown(config, results)
    (out / f"{NAME}.md").write_text(table)
    plot(out / f"{NAME}.png", results)
    return table
