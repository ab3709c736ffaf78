"""Expiry against the reference rules of SPEC §13 (:meth:`memory.domain.memgraph.MemGraph.
expire`), differentially: random writes on two keys (accept, contest, revoke, reject without a
value), some of whose versions expire at random instants among the later writes, committed
through the one write path; then memory as of random instants — each commit, each expiry, the
microsecond before it, moments between — read from the database must be what the reference
model gives when it replays the writes at their commit times and ends, up to that instant,
what had ended.

The instants are the database's own: each expiry is written on its version right after the
commit that made it, a few hundred microseconds to a few milliseconds later (the clock of the
test is the commits' own)."""

from __future__ import annotations

import copy
import itertools
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory.domain import InvalidOperation, OpRequest, OpType
from memory.domain.memgraph import MemGraph
from memory.models import Cell, Operation, Version
from memory.selectors.cells import cell_state
from memory.selectors.history import HISTORY_MAX
from memory.services import namespace_create, observation_ingest
from memory.services.expiry import expire_due

pytestmark = pytest.mark.django_db

KEYS = ("k1", "k2")
VALUES = ("a", "b", "c")
KINDS = ("accept", "accept", "accept", "contest", "contest", "revoke", "reject_none")
_names = itertools.count(1)

steps = st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(KINDS),
                           st.sampled_from(VALUES),
                           st.one_of(st.none(), st.integers(1, 6_000))),  # µs after commit
                 min_size=1, max_size=12)
between = st.lists(st.floats(0.0, 1.0), max_size=4)

EPOCH = datetime(2026, 1, 1, tzinfo=timezone.get_current_timezone())


def _us(moment: datetime) -> float:
    """An instant as the reference model orders them: microseconds since an epoch."""
    return (moment - EPOCH) / timedelta(microseconds=1)


def _fact(key: str, kind: str, value: str) -> dict[str, Any]:
    if kind == "revoke":
        return {"key": key, "op": "revoke"}
    if kind == "reject_none":
        return {"key": key, "op": "reject"}
    return {"key": key, "value": value, "op": kind}


def _request(kind: str, value: str) -> OpRequest:
    op = {"reject_none": "reject"}.get(kind, kind)
    return OpRequest(OpType(op), value if kind in ("accept", "contest") else None, None)


def _db_state(ns, moment: datetime) -> dict[str, Any]:
    out = {}
    for cell in Cell.objects.filter(namespace=ns):
        state = cell_state(cell, as_of=moment, history=HISTORY_MAX)
        if not state.existed or not state.history:
            continue
        out[cell.key] = (state.value, str(state.status),
                         sorted(a["value"] for a in state.alternatives),
                         [(e.value, e.status) for e in state.history])
    return out


def _ref_state(graph: MemGraph) -> dict[str, Any]:
    out = {}
    for key in sorted({v.key for v in graph.versions.values()}):
        mine = sorted((v for v in graph.versions.values() if v.key == key), key=lambda v: -v.id)
        head = graph.heads.get(key)
        status = graph.versions[head].status if head else None
        out[key] = (graph.versions[head].value if head else None,
                    {"contested": "contested", None: "empty"}.get(status, "active"),
                    sorted(v.value for v in mine if v.status == "alternative"),
                    [(v.value, str(v.status)) for v in mine])
    return out


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(plan=steps, fractions=between)
def test_memory_as_of_any_instant_is_what_the_reference_rules_give(plan, fractions):
    ns = namespace_create(name=f"ending-{next(_names)}")
    graph = MemGraph()
    snapshots: list[tuple[float, MemGraph]] = []
    instants: list[datetime] = []
    for key, kind, value, after_us in plan:
        known = set(Version.objects.filter(namespace=ns).values_list("id", flat=True))
        observation_ingest(namespace=ns, facts=[_fact(key, kind, value)], actor="api:prop")
        done = (Operation.objects.filter(namespace=ns).exclude(type="expire")
                .exclude(type="reinstate").order_by("-id").first())
        assert done is not None
        at = done.created_at
        graph.expire(_us(at))  # what the commit ends first, on the cells it locks
        before = set(graph.versions)
        try:
            graph.apply(key, _request(kind, value))
        except InvalidOperation:
            pass  # recorded as a refused noop: no version, as in the database
        made = [v for v in Version.objects.filter(namespace=ns).exclude(id__in=known)]
        new_ref = sorted(set(graph.versions) - before)
        assert len(made) == len(new_ref)
        if after_us is not None and made:
            ends = at + timedelta(microseconds=after_us)
            Version.objects.filter(pk=made[0].pk).update(expires_at=ends)
            graph.versions[new_ref[0]].expires_at = _us(ends)
            instants += [ends, ends - timedelta(microseconds=1)]
        instants.append(at)
        snapshots.append((_us(at), copy.deepcopy(graph)))
    expire_due(namespace_id=ns.pk)  # a read now: everything due has ended
    first, last = min(instants), max(instants)
    instants += [first + (last - first) * f for f in fractions]
    instants.append(first - timedelta(microseconds=1))
    for moment in sorted(set(instants)):
        taken = [g for t, g in snapshots if t <= _us(moment)]
        expected: dict[str, Any] = {}
        if taken:
            reference = copy.deepcopy(taken[-1])
            reference.expire(_us(moment))
            expected = _ref_state(reference)
        assert _db_state(ns, moment) == expected, moment
    graph.expire(_us(timezone.now()))
    assert _db_state(ns, timezone.now()) == _ref_state(graph)
