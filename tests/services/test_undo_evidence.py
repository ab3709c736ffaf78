"""Undo brings back what was there (SPEC §3): a value back by an undo keeps the evidence and
metadata of the version it brings back — the restored head ``restores`` x and carries x's
``supported_by`` edges; the alternatives of a contest reopened by undoing its resolution carry
their own observations, never "no observation behind it". x itself never changes."""

from __future__ import annotations

import pytest

from memory.models import Operation, SupportEdge, Version
from memory.services import observation_ingest, operation_apply, operation_undo

pytestmark = pytest.mark.django_db
KEY = "carol_drink"


def observe(ns, value, op="accept", source="chat", metadata=None):
    fact = {"key": KEY, "value": value, "op": op, **({"metadata": metadata} if metadata else {})}
    observation_ingest(namespace=ns, text=f"{KEY} is {value}", facts=[fact], source=source,
                       actor="api:agent")


def person(ns, op, value=None, version=None):
    return operation_apply(namespace=ns, key=KEY, op=op, value=value, version_id=version,
                           actor="user:rev", explicit=True, reason="test").operation


def evidence_of(version_id):
    return set(SupportEdge.objects.filter(version_id=version_id, evidence__isnull=False)
               .values_list("evidence_id", flat=True))


def test_undoing_a_resolution_reopens_the_contest_with_each_values_own_evidence(ns):
    observe(ns, "tea", metadata={"confidence": "high"})
    observe(ns, "coffee", op="contest", source="calendar")
    observe(ns, "water", op="contest", source="mail")
    losers = {v.value: v for v in Version.objects.filter(cell__namespace=ns, value__in=["tea",
                                                                                         "water"])}
    before = {value: evidence_of(v.pk) for value, v in losers.items()}
    assert all(before.values())
    resolve = person(ns, "resolve", "coffee")
    applied = operation_undo(namespace=ns, operation_id=resolve.pk, actor="user:rev")
    back = {a.operation.version.value: a.operation.version for a in applied}
    assert set(back) == {"tea", "water"}
    for value, version in back.items():
        assert version.status == "alternative"
        assert evidence_of(version.pk) == before[value]  # the same observations, not copies
        assert version.support == 1 + len(before[value])  # the undo itself, as restore counts
        assert version.pk != losers[value].pk
    assert back["tea"].metadata == {"confidence": "high"}
    # the contradicted versions themselves are untouched
    for value, v in losers.items():
        v.refresh_from_db()
        assert v.status == "contradicted" and evidence_of(v.pk) == before[value]
    reopen = Operation.objects.get(pk=applied[0].operation.pk)
    assert reopen.payload["reopens"] in {v.pk for v in losers.values()}


def test_retract_undo_twice_keeps_the_first_values_evidence_and_points_back(ns):
    observe(ns, "tea")
    observe(ns, "coffee", metadata={"cup": "large"})
    coffee = Version.objects.get(cell__namespace=ns, value="coffee")
    first = evidence_of(coffee.pk)
    for _ in range(2):
        retract = person(ns, "revoke")
        [restored] = operation_undo(namespace=ns, operation_id=retract.pk, actor="user:rev")
    head = Version.objects.get(pk=restored.operation.version_id)
    assert head.value == "coffee" and head.status == "active"
    assert first <= evidence_of(head.pk)
    assert head.metadata == {"cup": "large"}
    # the chain of restores leads back to the first coffee
    chain, at = [], head
    while at.restores_id is not None:
        at = Version.objects.get(pk=at.restores_id)
        chain.append(at.pk)
    assert chain[-1] == coffee.pk
