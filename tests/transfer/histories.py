"""Random histories for the export round trip, built through the services in-process: every
operation, contests and resolutions, retractions and restores, undo, late reports
(``observed_at``), source trust, text observations, aliases, idempotency keys, erased keys,
and an observation left pending or failed at the end."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import strategies as st

from memory.domain import InvalidOperation
from memory.models import Cell, KeyAlias, Operation, SourceTrust, Version
from memory.services import (
    CellNotFound,
    NotUndoable,
    cell_erase,
    namespace_drain,
    observation_extract,
    observation_fail,
    observation_ingest,
    observation_record,
    operation_apply,
    operation_undo,
)

KEYS = ("city", "phone", "pet")
VALUES = ("Rome 12", "Paris", "ring 77", "ring 65", "a cat")
SOURCES = ("", "crm", "gossip")
ALIASES = {"city": "town", "phone": "tel", "pet": "animal"}
OPS = ("accept", "contest", "reject", "revoke", "revoke_other", "resolve", "noop", "restore")
LATE = datetime(2020, 1, 1, tzinfo=UTC)
_idem = itertools.count(1)

keys, values = st.sampled_from(KEYS), st.sampled_from(VALUES)
step = st.one_of(
    st.tuples(st.just("observe"), keys, values, st.sampled_from(SOURCES), st.booleans(),
              st.booleans()),
    st.tuples(st.just("op"), keys, st.sampled_from(OPS), values, st.integers(0, 9)),
    st.tuples(st.just("op"), keys, st.sampled_from(OPS), values, st.integers(0, 9)),
    st.tuples(st.just("undo"), st.integers(0, 30)),
    st.tuples(st.just("trust"), st.sampled_from(SOURCES[1:]), st.integers(-1, 3)),
    st.tuples(st.just("erase"), keys),
    st.tuples(st.just("alias"), keys),
    st.tuples(st.just("replay"), keys, values),
)
#: One history that surely holds each kind of step (the random ones may miss some): city
#: accepted from a trusted source, contested by a less trusted one (outranked), resolved for
#: the challenger, retracted, the first value restored, the restore undone; phone from a late
#: report, replaced, a later-dated late report placed into the history, the head retracted
#: (rollback reinstates); an alias; pet stored with an idempotency key, then erased; one
#: observation left pending.
EVERY_KIND: tuple[list[tuple[Any, ...]], str | None] = ([
    ("trust", "crm", 2), ("observe", "city", "Rome 12", "crm", False, False),
    ("observe", "city", "Paris", "gossip", False, True),
    ("op", "city", "resolve", "Paris", 0), ("op", "city", "revoke", "x", 1),
    ("op", "city", "restore", "x", 0), ("undo", 99),
    ("observe", "phone", "ring 77", "", True, False),
    ("observe", "phone", "ring 65", "", False, False),
    ("observe", "phone", "ring 12", "", True, True),
    ("op", "phone", "revoke", "x", 1),
    ("alias", "city"), ("replay", "pet", "a cat"), ("op", "pet", "noop", "x", 3),
    ("observe", "pet", "a dog", "", False, False), ("erase", "pet"),
], "pending")

histories = st.tuples(st.lists(step, min_size=1, max_size=7),
                      st.sampled_from([None, None, "pending", "failed"]))


def _versions(ns: Any, key: str, statuses: tuple[str, ...] | None = None) -> list[int]:
    qs = Version.objects.filter(namespace=ns, cell__key=key)
    if statuses:
        qs = qs.filter(status__in=statuses)
    return list(qs.order_by("id").values_list("id", flat=True))


def _operate(ns: Any, key: str, kind: str, value: str, pick: int) -> None:
    op, val, version = kind, value, None
    if kind in ("revoke", "noop", "reject"):
        val = None if kind != "reject" or pick % 2 else value
    if kind == "revoke_other":
        op, val = "revoke", None
        found = _versions(ns, key)
        version = found[pick % len(found)] if found else None
    if kind == "restore":
        found = _versions(ns, key, ("revoked", "contradicted"))
        if not found:
            return
        version, val = found[pick % len(found)], None
    if kind == "resolve" and pick % 2:
        found = _versions(ns, key, ("alternative", "contested"))
        version, val = (found[pick % len(found)], None) if found else (None, value)
    try:
        operation_apply(namespace=ns, key=key, op=op, value=val, version_id=version,
                        actor="user:reviewer", reason=f"because {pick}", explicit=pick % 3 == 0)
    except (InvalidOperation, CellNotFound):
        pass


def _undo(ns: Any, pick: int) -> None:
    ops = list(Operation.objects.filter(namespace=ns).exclude(type__in=("reinstate", "noop"))
               .order_by("id").values_list("id", flat=True))
    if not ops:
        return
    try:
        operation_undo(namespace=ns, operation_id=ops[pick % len(ops)], actor="user:reviewer")
    except (NotUndoable, InvalidOperation):
        pass


def _observe(ns: Any, key: str, value: str, source: str, late: bool, text: bool,
             n: int) -> None:
    when = LATE + timedelta(hours=n) if late else None
    if text:
        observation_ingest(namespace=ns, text=f"Noted today.\n{key}: {value}", source=source,
                           observed_at=when)
    else:
        observation_ingest(namespace=ns, facts=[{"key": key, "value": value}], source=source,
                           observed_at=when)


def _replay(ns: Any, key: str, value: str) -> None:
    """The same observation sent twice with one idempotency key: stored once."""
    idem = f"idem-{next(_idem)}"
    for _ in range(2):
        recorded = observation_record(namespace=ns, facts=[{"key": key, "value": value}],
                                      idempotency_key=idem, actor="api:agent")
    observation_extract(evidence_id=recorded.evidence.pk)
    namespace_drain(namespace_id=ns.pk)


def play(ns: Any, history: tuple[list[tuple[Any, ...]], str | None]) -> list[str]:
    """Apply ``history`` to ``ns``; returns the keys it erased."""
    steps, last = history
    erased = []
    for n, s in enumerate(steps):
        kind = s[0]
        if kind == "observe":
            _observe(ns, *s[1:], n=n)
        elif kind == "op":
            _operate(ns, *s[1:])
        elif kind == "undo":
            _undo(ns, s[1])
        elif kind == "trust":
            SourceTrust.objects.update_or_create(namespace=ns, source=s[1],
                                                 defaults={"level": s[2]})
        elif kind == "erase":
            try:
                cell_erase(namespace=ns, key=s[1], actor="user:dpo")
                erased.append(s[1])
            except CellNotFound:
                pass
        elif kind == "alias":
            cell = Cell.objects.filter(namespace=ns, key=s[1]).first()
            if cell is not None:
                KeyAlias.objects.get_or_create(namespace=ns, alias=ALIASES[s[1]],
                                               defaults={"cell": cell})
        elif kind == "replay":
            _replay(ns, *s[1:])
    if last == "pending":
        observation_record(namespace=ns, facts=[{"key": "city", "value": "Oslo"}])
    elif last == "failed":
        recorded = observation_record(namespace=ns, text="city: Bergen")
        observation_fail(evidence_id=recorded.evidence.pk, error="the model could not say")
    return erased
