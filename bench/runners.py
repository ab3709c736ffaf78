"""Scenario runners: feed generated events to every arm, ask the probes, aggregate.

Each runner returns ``(config, results)`` for :mod:`bench.report`. ``SCENARIOS`` is the
registry the ``pmem_bench`` command dispatches on; a new scenario plugs in by adding an entry.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean
from typing import Any

from django.test import override_settings

from memory.llm.readout import answer as answer_step
from memory.reads import READ_MODES, iterative_answer, read

from . import perf
from .answer import model_answer
from .arms import NEEDS_MODEL, Arm, PMemSession, Read, location_arms
from .audit import stream_audit
from .cost import run_cost_scenario
from .datasets import locomo, longmemeval
from .scenarios import alfworld, contest, factconsolidation, retraction
from .scenarios.common import LocationCase, mentions

Progress = Callable[[int, int], None]
Results = tuple[dict[str, Any], list[dict[str, Any]]]


@dataclass
class RunConfig:
    run_id: str
    out: Path
    cases: int | None = None
    lengths: tuple[int, ...] = alfworld.LENGTHS
    distances: tuple[int, ...] = retraction.DISTANCES
    sizes: tuple[int, ...] = factconsolidation.SIZES
    questions: int = factconsolidation.QUESTIONS
    dataset: Path | None = None
    client: Any = None  # memory.llm.client.ModelClient, or None: no model configured
    progress: Progress = field(default=lambda done, total: None)
    scale: str = "medium"  # perf, erase, history: small | medium | full
    only: str | None = None  # perf: one section alone ("graph", "agents")
    baseline: Path | None = None  # perf graph memory, throughput: older code beside this one
    throughput: dict[str, Any] = field(default_factory=dict)  # its --latency, --in-flight, …
    frontier_conversations: int | None = None  # locomo_evidence: frontier on the first N only
    reuse_run: str | None = None  # locomo_evidence: read an earlier run's namespaces

    @property
    def model(self) -> str | None:
        return getattr(self.client, "model", None)


# --- the ALFWorld-derived probes --------------------------------------------------------------


def _ask(arm: Arm, case: LocationCase, label: str, upto: int, client: Any) -> dict[str, Any] | None:
    """One arm answers one probe; None when the arm needs a model and there is none."""
    if arm.needs_model and client is None:
        return None
    read: Read = arm.read(question=case.question, key=case.key, target=case.target, upto=upto)
    failed = None
    if client is None:
        answer = read.value
    else:  # a failed call is a failed case (scored wrong and counted), never a crash
        answered = answer_step(client, question=case.question, context=read.context,
                               prompt=arm.prompt)
        answer, failed = answered.answer, answered.error
    retained = {name: arm.retains(key=case.key, value=value) for name, value in case.marks.items()}
    return {"arm": arm.name, "case": case.case, **case.axis, "probe": label, "answer": answer,
            "context": read.context, "context_chars": len(read.context), "status": read.status,
            "candidates": read.candidates, "retains": retained, "failed": failed}


def _run_case(case: LocationCase, session: PMemSession, arms: list[Arm],
              client: Any) -> list[dict[str, Any]]:
    """Ingest the case's events in arrival order, asking each probe once its events are in."""
    name = f"{case.case}-" + "-".join(f"{k}{v}" for k, v in case.axis.items())
    session.begin(name)
    for arm in arms:
        arm.begin(name)
    probes = {p.after: p for p in case.probes}
    records = []
    for n, event in enumerate(case.events, start=1):
        session.ingest(event)
        for arm in arms:
            arm.ingest(event)
        if n in probes:
            probe = probes[n]
            for arm in arms:
                record = _ask(arm, case, probe.label, n, client)
                if record is not None:
                    records.append({**record, "gold": probe.gold,
                                    "correct": mentions(record["answer"], probe.gold)})
    if session.failed:  # an observation of the case failed: the whole case is failed
        reason = session.failed[0]
        records = [{**r, "failed": r["failed"] or reason, "correct": False} for r in records]
    return records


def _failed(rows: list[dict[str, Any]]) -> int:
    """Records whose case failed (an observation or a model call that failed)."""
    return sum(bool(r.get("failed")) for r in rows)


def _run_cases(cases: list[LocationCase], config: RunConfig, scenario: str,
               **arm_options: Any) -> tuple[list[Arm], list[dict[str, Any]]]:
    session, arms = location_arms(config.run_id, scenario, **arm_options)
    records: list[dict[str, Any]] = []
    for done, case in enumerate(cases, start=1):
        records += _run_case(case, session, arms, config.client)
        config.progress(done, len(cases))
    return arms, records


def _not_run(arm: Arm, **axis: Any) -> dict[str, Any]:
    return {"arm": arm.name, **axis, "status": NEEDS_MODEL, "accuracy": None, "n": 0,
            "context_chars": None}


def _rate(flags: Iterable[bool]) -> float | None:
    values = list(flags)
    return round(100 * sum(values) / len(values), 1) if values else None


def _config(config: RunConfig, **extra: Any) -> dict[str, Any]:
    return {"run_id": config.run_id, "seed": 42, "model": config.model, **extra}


def run_alfworld(config: RunConfig) -> Results:
    cases = alfworld.generate(config.cases or alfworld.CASES, config.lengths)
    arms, records = _run_cases(cases, config, alfworld.NAME, k=10)
    results = []
    for length in config.lengths:
        for arm in arms:
            rows = [r for r in records if r["arm"] == arm.name and r["L"] == length]
            if not rows:
                results.append(_not_run(arm, L=length))
                continue
            results.append({"arm": arm.name, "L": length, "status": "run",
                            "accuracy": _rate(r["correct"] for r in rows), "n": len(rows),
                            "failed": _failed(rows),
                            "context_chars": round(mean(r["context_chars"] for r in rows), 1)})
    return _config(config, cases=config.cases or alfworld.CASES, L=list(config.lengths),
                   distractor_objects=alfworld.DISTRACTORS, top_k=10), results


def run_retraction(config: RunConfig) -> Results:
    cases = retraction.generate(config.cases or retraction.CASES, config.distances)
    marks = {(c.case, c.axis["d"]): c.marks for c in cases}
    arms, records = _run_cases(cases, config, retraction.NAME, k=10)
    results = []
    for distance in config.distances:
        for arm in arms:
            rows = [r for r in records if r["arm"] == arm.name and r["d"] == distance]
            if not rows:
                results.append(_not_run(arm, d=distance))
                continue
            results.append(_retraction_row(arm.name, distance, rows, marks))
    return _config(config, cases=config.cases or retraction.CASES, d=list(config.distances),
                   top_k=10), results


def _retraction_row(arm: str, distance: int, rows: list[dict[str, Any]],
                    marks: dict[tuple[int, int], dict[str, str]]) -> dict[str, Any]:
    """Outcomes over committed cases only (the error was read back before the retraction)."""
    pre = {r["case"]: r for r in rows if r["probe"] == "pre"}
    post = {r["case"]: r for r in rows if r["probe"] == "post"}
    committed = [c for c, r in pre.items() if mentions(r["answer"], marks[(c, distance)]["v2"])
                 and not r.get("failed") and not post[c].get("failed")]
    outcomes = [_outcome(post[c]["answer"], marks[(c, distance)]) for c in committed]
    survives = [r["retains"]["v1"] for r in post.values() if r["retains"]["v1"] is not None]
    return {
        "arm": arm, "d": distance, "status": "run", "accuracy": _rate(o == "recovered" for o in outcomes),
        "n": len(committed), "cases": len(pre), "failed": _failed(list(post.values())), "committed": _rate(c in committed for c in pre),
        "recovered": _rate(o == "recovered" for o in outcomes),
        "wrong": _rate(o == "wrong" for o in outcomes), "lost": _rate(o == "lost" for o in outcomes),
        "v1_in_store": _rate(survives),
        "context_chars": round(mean(r["context_chars"] for r in post.values()), 1),
    }


def _outcome(answer: str | None, marks: dict[str, str]) -> str:
    if mentions(answer, marks["v1"]):
        return "recovered"
    return "wrong" if mentions(answer, marks["v2"]) else "lost"


def run_contest(config: RunConfig) -> Results:
    cases = contest.generate(config.cases or contest.CASES)
    by_case = {c.case: c for c in cases}
    arms, records = _run_cases(cases, config, contest.NAME, k=10, disclose=("alternatives",))
    results = []
    for arm in arms:
        rows = [r for r in records if r["arm"] == arm.name]
        if not rows:
            results.append(_not_run(arm))
            continue
        pre = [r for r in rows if r["probe"] == "pre"]
        post = [r for r in rows if r["probe"] == "post"]
        recorded = [_both(r["candidates"], by_case[r["case"]]) for r in pre if not arm.needs_model]
        results.append({
            "arm": arm.name, "status": "run", "accuracy": _rate(r["correct"] for r in post),
            "n": len(post), "failed": _failed(post), "recorded": _rate(recorded),
            "flagged": _rate(_flagged(r, by_case[r["case"]], config.client) for r in pre),
            "pre_matches_gold": _rate(r["correct"] for r in pre),
            "context_chars": round(mean(r["context_chars"] for r in pre), 1),
        })
    return _config(config, cases=config.cases or contest.CASES,
                   distractor_events=contest.DISTRACTOR_EVENTS), results


def _both(values: Iterable[str | None], case: LocationCase) -> bool:
    text = " | ".join(v for v in values if v)
    return mentions(text, case.marks["a"]) and mentions(text, case.marks["b"])


def _flagged(record: dict[str, Any], case: LocationCase, client: Any) -> bool:
    """Before the check, the read surfaces the conflict: a model's answer names both reports;
    a store answering by itself shows the cell contested with both candidates."""
    if client is not None:
        return _both([record["answer"]], case)
    return record["status"] == "contested" and _both([record["context"]], case)


# --- FactConsolidation -----------------------------------------------------------------------

FC_ARMS = ("commit", "commit_iterative", "raw_top12", "raw_order_tags")
#: The read mode (memory.reads.READ_MODES) each one-read arm answers from.
#: The paper's: the cosine frontier read (the default read fuses it with a lexical score).
FC_READ_MODES = {"commit": "frontier_cosine", "raw_top12": "raw", "raw_order_tags": "raw_ordered"}


def run_factconsolidation(config: RunConfig) -> Results:
    patterns = config.out / "factconsolidation-patterns.json"
    patterns.parent.mkdir(parents=True, exist_ok=True)
    patterns.write_text(json.dumps(factconsolidation.rule_pattern_entries(), indent=1))
    results: list[dict[str, Any]] = []
    with override_settings(PMEM_RULE_PATTERNS=str(patterns)):
        for done, size in enumerate(config.sizes, start=1):
            stream = factconsolidation.make_stream(size, config.questions)
            session = PMemSession(config.run_id, factconsolidation.NAME)
            session.begin(str(size))
            _ingest_stream(session, stream, config.progress, done, len(config.sizes))
            results.append({"arm": "commit", "size": size, "status": "audit",
                            **stream_audit(session.namespace, stream),
                            "failed_observations": len(session.failed)})
            results += _fc_answers(session, stream, config.client)
    return _config(config, sizes=list(config.sizes), questions_per_kind=config.questions,
                   top_k=12, granularity="one observation per numbered fact"), results


def _ingest_stream(session: PMemSession, stream: factconsolidation.Stream, progress: Progress,
                   done: int, total: int) -> None:
    lines = stream.text.split("\n")[1:]
    for i, line in enumerate(lines, start=1):
        session.ingest(factconsolidation.line_event(i, line))
        if i % 50 == 0 or i == len(lines):
            progress((done - 1) * len(lines) + i, total * len(lines))


def _fc_answers(session: PMemSession, stream: factconsolidation.Stream,
                client: Any) -> list[dict[str, Any]]:
    """Single- and multi-hop accuracy and the single-hop stale rate per read arm (needs a model)."""
    rows = []
    for arm in FC_ARMS:
        for kind in ("single", "multi"):
            questions = [q for q in stream.questions if q.kind == kind]
            if client is None:
                rows.append({"arm": arm, "size": stream.size, "hops": kind, "status": NEEDS_MODEL,
                             "accuracy": None, "n": 0, "context_chars": None})
                continue
            predictions = [_fc_predict(session, arm, q, client) for q in questions]
            scored = [factconsolidation.substring_exact_match(p, q.gold) for q, p, _ in predictions]
            chains = [(q, p) for q, p, _ in predictions if q.stale]
            rows.append({
                "arm": arm, "size": stream.size, "hops": kind, "status": "run",
                "accuracy": _rate(scored), "n": len(scored),
                "stale_rate": _rate(factconsolidation.is_stale(p, q) for q, p in chains)
                if kind == "single" else None,
                "context_chars": round(mean(c for _, _, c in predictions), 1),
            })
    return rows


def _fc_predict(session: PMemSession, arm: str, question: Any, client: Any) -> tuple[Any, str, int]:
    """(question, prediction, context size) for one arm; the iterative arm lets the model
    look up more cells (paper B.4), the others answer from one read."""
    if arm == "commit_iterative":
        result = iterative_answer(client, namespace=session.namespace, question=question.text,
                                  mode="frontier_cosine")
        return question, result.answer, result.context_chars
    mode = READ_MODES[FC_READ_MODES[arm]]
    context = read(mode.name, namespace=session.namespace, query=question.text, k=12).context
    return question, model_answer(client, prompt=mode.prompt, context=context,
                                  question=question.text), len(context)


# --- datasets that need a model ---------------------------------------------------------------


def _needs_dataset_and_model(config: RunConfig) -> Results | None:
    """The row to report when a dataset runner cannot run; None when it can."""
    missing = None
    if config.client is None:
        missing = NEEDS_MODEL
    elif config.dataset is None or not config.dataset.exists():
        missing = "needs --dataset PATH"
    if missing is None:
        return None
    row = {"arm": "commit", "status": missing, "accuracy": None, "n": 0, "context_chars": None}
    return _config(config, dataset=str(config.dataset) if config.dataset else None), [
        row, {**row, "arm": "raw_top12"}]


def run_longmemeval(config: RunConfig) -> Results:
    return _needs_dataset_and_model(config) or longmemeval.run(config)


def run_locomo(config: RunConfig) -> Results:
    return _needs_dataset_and_model(config) or locomo.run(config)


def run_cost(config: RunConfig) -> Results:
    return run_cost_scenario(config)


def run_sessions(config: RunConfig) -> Results:
    from . import sessions

    return sessions.run(config)


def run_perf(config: RunConfig) -> Results:
    return perf.run(config)


def run_erase(config: RunConfig) -> Results:
    from . import erase

    return erase.run(config)


def run_history(config: RunConfig) -> Results:
    from . import history

    return history.run(config)


def run_transfer(config: RunConfig) -> Results:
    from . import transfer

    return transfer.run(config)


def run_recall(config: RunConfig) -> Results:
    from . import recall

    return recall.run(config)


def run_locomo_evidence(config: RunConfig) -> Results:
    from . import locomo_evidence

    return locomo_evidence.run(config)


def run_throughput(config: RunConfig) -> Results:
    from . import throughput_report

    return throughput_report.run(config)


SCENARIOS: dict[str, Callable[[RunConfig], Results]] = {
    alfworld.NAME: run_alfworld,
    retraction.NAME: run_retraction,
    contest.NAME: run_contest,
    factconsolidation.NAME: run_factconsolidation,
    "longmemeval": run_longmemeval,
    "locomo": run_locomo,
    "perf": run_perf,
    "cost": run_cost,
    "erase": run_erase,
    "history": run_history,
    "transfer": run_transfer,
    "recall": run_recall,
    "locomo_evidence": run_locomo_evidence,
    "throughput": run_throughput,
    "sessions": run_sessions,
}
