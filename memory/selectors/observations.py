"""Observations (evidence): one whole with what it did and how it became facts, the ones not
committed yet or failed, those whose extraction dropped facts or found none, and what each
observation of a raw read stands for now. A list row carries the head of a text or of the facts,
cut in SQL; the facts, the extraction and the embedding never leave the database for a row that
does not show them (a megabyte of facts copied per row would cost the reads gigabytes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import (
    BooleanField,
    Exists,
    ExpressionWrapper,
    F,
    Func,
    IntegerField,
    OuterRef,
    Q,
    TextField,
)
from django.db.models.fields.json import KT, KeyTransform
from django.db.models.functions import Cast, Left

from memory.domain import (
    BIGINT_MAX,
    UNSETTLED_STATES,
    EvidenceState,
    OpType,
    Status,
)
from memory.models import Evidence, Namespace, Operation, SupportEdge

from . import settled
from .shapes import LIST_TEXT_CHARS

#: How long an API request that asks to wait for the commit waits, at most (seconds).
WAIT_SECONDS = 30.0


def observation_in(*, namespace: Namespace, pk: int) -> Evidence | None:
    """One observation of ``namespace`` with its text and facts (never its extraction or its
    embedding: :func:`observation_detail` cuts what it shows of the extraction in SQL)."""
    if pk > BIGINT_MAX:
        return None
    return (Evidence.objects.filter(namespace=namespace, pk=pk)
            .defer("extracted", "embedding").first())


def observation_state(*, namespace: Namespace, pk: int) -> Evidence | None:
    """One observation of ``namespace``, its state alone (what a retry needs)."""
    if pk > BIGINT_MAX:
        return None
    return (Evidence.objects.filter(namespace=namespace, pk=pk)
            .only("id", "namespace_id", "state").first())


def observation_note(*, state: str, facts_found: int | None, operations: int,
                     extractor: str | None) -> str:
    """Said in words when a committed observation yielded no fact, which would otherwise pass
    unnoticed: which extractor read it and what to do instead. Empty otherwise."""
    if state != EvidenceState.COMMITTED or facts_found is None or facts_found > 0 or operations:
        return ""
    by = {"rules": "the rule extractor", "model": "the model"}.get(
        (extractor or "").split("+")[-1], "extraction")
    hint = ("write it as `key = value` lines or send structured facts, or configure a model"
            if by == "the rule extractor" else "send it as structured facts")
    return f"No fact found: {by} read nothing it could store in this text; {hint}."


def observation_detail(evidence: Evidence) -> dict[str, Any]:
    """An observation as the API shows it (``ObservationOut``): its text and facts, when it
    was observed, received and committed, the operations it produced with the status each
    version has now, what its model calls cost, how it became facts and what it yielded.
    Two statements: the operations with their versions' status and ordinal (one join, so a
    waiting request answers soon after the commit), the extraction's parts."""
    ops = list(Operation.objects.filter(evidence=evidence).order_by("id").only(
        "id", "type", "requested", "key", "value", "version_id", "reason", "actor", "method",
        "source").annotate(version_status=F("version__status"),
                           version_ordinal=F("version__ordinal")))
    return {
        "id": evidence.id, "seq": evidence.seq, "status": evidence.state,
        "error": evidence.error, "source": evidence.source, "text": evidence.text,
        "facts": evidence.facts, "messages": evidence.messages,
        "observed_at": evidence.observed_at,
        "received_at": evidence.received_at, "committed_at": evidence.committed_at,
        "operations": [
            {"op": o.type, "requested": o.requested, "key": o.key, "value": o.value,
             "version": o.version_id, "ordinal": o.version_ordinal,
             "status": o.version_status, "reason": o.reason,
             "actor": o.actor, "method": o.method, "source": o.source}
            for o in ops
        ],
        "cost": {"chat_calls": evidence.chat_calls, "embed_calls": evidence.embed_calls,
                 "prompt_tokens": evidence.prompt_tokens,
                 "completion_tokens": evidence.completion_tokens},
        **_yield_body(evidence, len(ops)),
    }


def _yield_body(evidence: Evidence, operations: int) -> dict[str, Any]:
    """``extraction``, plus what the observation yielded: ``facts_found`` and a ``note`` in
    words when it was committed with no fact."""
    extraction = extraction_body(evidence.pk)
    found = None if extraction is None else extraction.pop("facts_found")
    note = observation_note(
        state=evidence.state, facts_found=found, operations=operations,
        extractor=extraction["extractor"] if extraction else None)
    return {"extraction": extraction, "facts_found": found, "note": note}


def extraction_body(evidence_id: int) -> dict[str, Any] | None:
    """How the observation's text became facts: the extractor, the model's raw answer, and
    the facts refused before anything was written (each with its reason). None before
    extraction. Only these parts are cut out of the extraction, in SQL: its facts and cached
    vectors never leave the database."""
    parts = (Evidence.objects.filter(pk=evidence_id)
             .values_list(KT("extracted__extractor"), KT("extracted__raw"),
                          KT("extracted__extraction_error"),
                          KeyTransform("dropped", "extracted"),
                          ExpressionWrapper(Q(extracted__isnull=True),
                                            output_field=BooleanField()),
                          Func(KeyTransform("facts", "extracted"),
                               function="jsonb_array_length", output_field=IntegerField()))
             .first())
    if parts is None or parts[4]:
        return None
    extractor, raw, error, dropped, _, found = parts
    return {"extractor": extractor, "raw": raw or "", "error": error,
            "dropped": list(dropped or []), "facts_found": found or 0}


def observation_when_settled(evidence_id: int, timeout: float = WAIT_SECONDS) -> Evidence:
    """The observation once it is committed or failed, or as it is after ``timeout`` seconds
    (text and facts; never the extraction or the embedding): woken by the commit's notice
    (:mod:`memory.selectors.settled`), never polling but for a slow safety net."""
    return settled.observation_when_settled(evidence_id, timeout)


def observations_unsettled(*, namespace: Namespace, limit: int = 50,
                           failed_only: bool = False) -> list[Evidence]:
    """Observations not committed yet (pending, processing) or failed, newest first."""
    states = [EvidenceState.FAILED] if failed_only else [*UNSETTLED_STATES, EvidenceState.FAILED]
    # A row shows the head of its text, else of its facts: both cut in SQL under their own
    # names (``text_head``, ``facts_head``), so a megabyte of facts never leaves the database
    # for a table cell.
    return list(Evidence.objects.filter(namespace=namespace, state__in=states)
                .only("id", "namespace_id", "seq", "state", "source", "error", "received_at")
                .annotate(text_head=Left("text", LIST_TEXT_CHARS),
                          facts_head=Left(Cast("facts", TextField()), LIST_TEXT_CHARS))
                .order_by("-seq")[:limit])


#: How far back the log looks for observations whose model answer had facts dropped.
DROPS_WINDOW = 500
#: How much of such an observation's raw model answer the log shows.
DROPS_RAW_CHARS = 4000


def observations_with_drops(*, namespace: Namespace, limit: int = 20) -> list[Evidence]:
    """Recent observations (the last ``DROPS_WINDOW`` seqs, so the scan stays bounded on a
    long history) whose extraction dropped facts a model gave, newest first. Each carries
    ``dropped`` and the head of the raw answer (``raw_head``), cut out of the extraction in
    SQL: the extraction itself (facts, vectors) never leaves the database."""
    next_seq = Namespace.objects.filter(pk=namespace.pk).values_list("next_seq", flat=True)[0]
    return list(Evidence.objects.only("id", "namespace_id", "seq")
                .filter(namespace=namespace, seq__gte=next_seq - DROPS_WINDOW,
                        extracted__has_key="dropped")
                .annotate(dropped=KeyTransform("dropped", "extracted"),
                          raw_head=Left(KT("extracted__raw"), DROPS_RAW_CHARS))
                .order_by("-seq")[:limit])


def in_flight(*, namespace: Namespace, limit: int = 5) -> list[Evidence]:
    """The namespace's observations still pending or processing, newest first: read on
    evidence_unsettled_idx. Failed ones are the log's business: counted in here, they would
    make this box scan a namespace's observations on every cell page."""
    return list(Evidence.objects.filter(namespace=namespace, state__in=UNSETTLED_STATES)
                .only("id", "namespace_id", "seq", "state", "source", "error", "received_at")
                .annotate(text_head=Left("text", LIST_TEXT_CHARS),
                          facts_head=Left(Cast("facts", TextField()), LIST_TEXT_CHARS))
                .order_by("-seq")[:limit])


@dataclass(frozen=True)
class ObservationPage:
    evidence: Evidence  # shown whole: text and facts (not the extraction or the embedding)
    operations: list[dict[str, Any]]  # what it did, values cut to LIST_TEXT_CHARS
    raw_outputs: list[str]  # each distinct raw model output once


def observation_page(*, namespace: Namespace, evidence_id: int) -> ObservationPage | None:
    """One observation whole: where graphs and lists link for the text they cut."""
    if evidence_id > BIGINT_MAX:
        return None
    evidence = (Evidence.objects.filter(namespace=namespace, pk=evidence_id)
                .defer("extracted", "embedding").first())
    if evidence is None:
        return None
    produced = Operation.objects.filter(evidence_id=evidence.pk)
    operations = list(produced.order_by("id").values(
        "id", "type", "requested", "key", "cell_id", "version_id", "reason", "actor", "method",
        version_ordinal=F("version__ordinal"), value_head=Left("value", LIST_TEXT_CHARS)))
    raw_outputs = list(produced.exclude(raw_output="").order_by("raw_output")
                       .values_list("raw_output", flat=True).distinct())
    return ObservationPage(evidence, [dict(o) for o in operations], raw_outputs)


#: How many of a namespace's latest observations the "no fact" list looks through.
NO_FACT_WINDOW = 500


def _facts_found() -> Func:
    return Func(KeyTransform("facts", "extracted"), function="jsonb_array_length",
                output_field=IntegerField())


def observation_yield(evidence: Evidence) -> str:
    """The note an observation page shows when the observation yielded no fact (else '')."""
    found, extractor = (Evidence.objects.filter(pk=evidence.pk)
                        .values_list(_facts_found(), KT("extracted__extractor")).first()
                        or (None, None))
    operations = Operation.objects.filter(evidence_id=evidence.pk).exists()
    return observation_note(state=evidence.state, facts_found=found,
                            operations=int(operations), extractor=extractor)


def observations_without_facts(*, namespace: Namespace, limit: int = 10) -> list[Evidence]:
    """Recent committed observations (the last ``NO_FACT_WINDOW`` seqs: a bounded scan) from
    which extraction took no fact, newest first, with the head of their text."""
    next_seq = Namespace.objects.filter(pk=namespace.pk).values_list("next_seq", flat=True)[0]
    return list(Evidence.objects.only("id", "namespace_id", "seq", "source", "actor",
                                      "committed_at")
                .filter(namespace=namespace, seq__gte=next_seq - NO_FACT_WINDOW,
                        state=EvidenceState.COMMITTED, extracted__facts=[])
                .filter(~Exists(Operation.objects.filter(evidence_id=OuterRef("pk"))))
                .annotate(text_head=Left("text", LIST_TEXT_CHARS))
                .order_by("-seq")[:limit])


#: A version's status as a reviewer reads it beside a line of a raw read.
LINE_MARKS: dict[str, str] = {Status.REVOKED: "retracted", Status.SUPERSEDED: "superseded",
              Status.CONTRADICTED: "contradicted", Status.ACTIVE: "current",
              Status.CONTESTED: "contested", Status.ALTERNATIVE: "alternative"}


def evidence_effects(evidence_ids: list[int]) -> dict[int, list[dict[str, Any]]]:
    """What each observation of a raw read stands for now, by key: the versions it supports
    (their status as a mark: current, superseded, retracted, …) and the retractions or
    rejections it asked for. Two queries for any number of lines."""
    out: dict[int, list[dict[str, Any]]] = {i: [] for i in evidence_ids}
    if not evidence_ids:
        return out
    seen: set[tuple[int, str, str]] = set()
    for row in (SupportEdge.objects.filter(evidence_id__in=evidence_ids)
                .order_by("evidence_id", "version_id")
                .values("evidence_id", "version_id", "version__status", "version__cell__key")):
        mark = LINE_MARKS.get(row["version__status"], row["version__status"])
        entry = (row["evidence_id"], row["version__cell__key"], mark)
        if entry not in seen:
            seen.add(entry)
            out[row["evidence_id"]].append({"key": row["version__cell__key"], "mark": mark})
    for op in (Operation.objects.filter(evidence_id__in=evidence_ids, cell__isnull=False,
                                         type__in=(OpType.REVOKE, OpType.REJECT))
                .order_by("evidence_id", "id").values("evidence_id", "type", "cell__key")):
        mark = "retraction" if op["type"] == OpType.REVOKE else "rejection"
        entry = (op["evidence_id"], op["cell__key"], mark)
        if entry not in seen:
            seen.add(entry)
            out[op["evidence_id"]].append({"key": op["cell__key"], "mark": mark})
    return out
