"""Memory as of T (SPEC §9) against the present it was, and against a replay of the log.

Random operation sequences on two keys (accept, contest and contest chains, reject with and
without a value, revoke of the head and of other versions, resolve, support) are applied through
the one write path; after each commit the present state is recorded with the commit's time.
Then every recorded moment is read back "as of" it and must equal what was recorded, and what
replaying the operation log up to that moment through the pure reference model
(:class:`memory.domain.memgraph.MemGraph`) gives.
"""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory.domain import InvalidOperation, OpRequest, OpType
from memory.domain.memgraph import MemGraph
from memory.domain.plan import OpInput
from memory.models import Cell, Operation, Version
from memory.selectors.cells import cell_state
from memory.selectors.history import HISTORY_MAX
from memory.selectors.timeline import status_timeline
from memory.services import namespace_create, operation_apply
from memory.services.graph import apply_batch

pytestmark = pytest.mark.django_db

KEYS = ("k1", "k2")
VALUES = ("a", "b", "c", "d")
KINDS = ("accept", "accept", "contest", "contest", "reject", "reject_none", "revoke",
         "revoke_other", "resolve", "noop")
_names = itertools.count(1)

steps = st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(KINDS),
                           st.sampled_from(VALUES), st.integers(0, 7), st.booleans()),
                 min_size=1, max_size=14)


def _item(ns, key: str, kind: str, value: str, pick: int) -> OpInput:
    versions = list(Version.objects.filter(cell__namespace=ns, cell__key=key)
                    .order_by("id").values_list("id", flat=True))
    target = versions[pick % len(versions)] if versions else None
    op, val, version = {
        "reject_none": ("reject", None, None),
        "revoke": ("revoke", None, None),
        "revoke_other": ("revoke", None, target),
        "noop": ("noop", None, None),
    }.get(kind, (kind, value, None))
    return OpInput(key=key, op=OpType(op), value=val, version_id=version)


def _commit(ns, group) -> None:
    """One step through operation_apply, or a group as ONE batch: one commit time for all."""
    if len(group) == 1:
        item = _item(ns, *group[0][:4])
        operation_apply(namespace=ns, key=item.key, op=item.op, value=item.value,
                        version_id=item.version_id, actor="user:prop", explicit=False)
        return
    with transaction.atomic():
        apply_batch(namespace=ns, items=[(_item(ns, *g[:4]), "user:prop") for g in group])


def _present(ns) -> dict[str, Any]:
    """Each key's head, status, alternatives and version statuses, read from the rows."""
    out = {}
    for cell in Cell.objects.filter(namespace=ns).select_related("head"):
        rows = list(Version.objects.filter(cell=cell).order_by("-id").values_list("id", "status"))
        alts = [v for v, s in sorted(rows) if s == "alternative"]
        out[cell.key] = (cell.head_id, cell.head.status if cell.head else None, alts, rows)
    return out


def _as_of(ns, moment) -> dict[str, Any]:
    out = {}
    for cell in Cell.objects.filter(namespace=ns).select_related("head"):
        state = cell_state(cell, as_of=moment, history=HISTORY_MAX)
        if not state.existed:
            continue
        status = {"active": "active", "contested": "contested"}.get(state.status)
        line = status_timeline(cell, buckets=3, as_of=moment)
        counted: dict[str, int] = {}
        for b in line["bins"]:
            for name, n in b["counts"].items():
                counted[name] = counted.get(name, 0) + n
        listed: dict[str, int] = {}
        for e in state.history:
            listed[e.status] = listed.get(e.status, 0) + 1
        assert counted == listed  # the timeline counts what the history lists, by status
        out[cell.key] = (state.version, status, [a["version"] for a in state.alternatives],
                         [(e.version, e.status) for e in state.history])
    return out


def _replayed(ns, moment) -> dict[str, Any]:
    """The operation log committed by ``moment`` replayed through the reference model; its
    versions are numbered in creation order, as the namespace's rows are by id."""
    ids = list(Version.objects.filter(cell__namespace=ns).order_by("id")
               .values_list("id", flat=True))
    to_mem = {vid: i + 1 for i, vid in enumerate(ids)}
    to_db = {i: vid for vid, i in to_mem.items()}
    mem = MemGraph()
    for o in Operation.objects.filter(namespace=ns, created_at__lte=moment).order_by("id"):
        if o.type == "reinstate":
            continue
        version = o.payload.get("version")
        try:
            mem.apply(o.key, OpRequest(OpType(o.requested), o.payload.get("value"),
                                       to_mem.get(version) if version else None))
        except InvalidOperation:
            pass
    out = {}
    for key in {v.key for v in mem.versions.values()}:
        mine = sorted((v for v in mem.versions.values() if v.key == key), key=lambda v: -v.id)
        head = mem.heads.get(key)
        out[key] = (to_db[head] if head else None,
                    str(mem.versions[head].status) if head else None,
                    [to_db[v.id] for v in reversed(mine) if v.status == "alternative"],
                    [(to_db[v.id], str(v.status)) for v in mine])
    return out


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(plan=steps)
def test_memory_as_of_each_commit_is_what_it_was_and_what_the_log_replays_to(plan):
    ns = namespace_create(name=f"travel-{next(_names)}")
    moments = []
    i = 0
    while i < len(plan):
        # A step flagged True joins the next one in one transaction: one commit time for both.
        group = [plan[i]]
        while group[-1][4] and i + 1 < len(plan):
            i += 1
            group.append(plan[i])
        i += 1
        _commit(ns, group)
        last = Operation.objects.filter(namespace=ns).order_by("-id").first()
        if last is not None:
            moments.append((last.created_at, _present(ns)))
    for moment, present in moments:
        assert _as_of(ns, moment) == present
        assert _replayed(ns, moment) == present
    if moments:
        first = Operation.objects.filter(namespace=ns).order_by("id").first()
        assert _as_of(ns, first.created_at - timedelta(microseconds=1)) == {}
