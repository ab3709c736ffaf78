"""Many observations in one request (``observations/batch/``): checked whole first (one bad
item stores nothing and is named by its path), stored in the given order with consecutive
seqs, each item's idempotency key honoured, two batches at once never interleaved."""

from __future__ import annotations

import json
import threading

import pytest
from django.db import connection
from rest_framework.test import APIClient

from memory.models import Cell, Evidence
from memory.services import token_create
from tests.api.test_api import base, post

pytestmark = pytest.mark.django_db


def batch(api, ns, observations, wait=False):
    url = base(ns) + "observations/batch/" + ("?wait=1" if wait else "")
    return post(api, url, {"observations": observations})


def facts(i, key="door"):
    return {"facts": [{"key": key, "value": f"v{i}"}], "idempotency_key": f"k{i}"}


def test_a_batch_is_stored_in_order_with_consecutive_seqs_and_committed_with_wait(api, ns):
    answer = batch(api, ns, [facts(i) for i in range(200)], wait=True)
    assert answer.status_code == 201, answer.json()
    results = answer.json()["results"]
    seqs = [r["seq"] for r in results]
    assert seqs == list(range(seqs[0], seqs[0] + 200))
    assert {r["status"] for r in results} == {"committed"} and not any(
        r["replayed"] for r in results)
    rows = list(Evidence.objects.filter(namespace=ns).order_by("seq"))
    assert [r.facts[0]["value"] for r in rows] == [f"v{i}" for i in range(200)]
    # Committed in the order given: the last item's value is the head.
    assert Cell.objects.get(namespace=ns, key="door").head.value == "v199"


def test_without_wait_the_batch_is_accepted_and_pending(api, ns):
    answer = batch(api, ns, [facts(0), {"text": "hello"}])
    assert answer.status_code == 202
    assert [r["status"] for r in answer.json()["results"]] == ["pending", "pending"]


@pytest.mark.parametrize(("bad", "field"), [
    ({"facts": [{"key": "!!!", "value": "x"}]}, "observations[57].facts[0].key"),
    ({"facts": [{"key": "a", "value": "x"}, {"value": "y"}]}, "observations[57].facts[1].key"),
    ({"text": ""}, "observations[57].text"),
    ({"messages": [{"role": "user", "content": "x", "at": "2023-01-01T10:00"}]},
     "observations[57].messages[0].at"),
    ({"text": "x", "observed_at": "2023-01-01T10:00:00+99:00"}, "observations[57].observed_at"),
    ("not an object", "observations[57]"),
])
def test_one_bad_item_refuses_the_batch_whole_naming_its_path(api, ns, bad, field):
    items = [facts(i) for i in range(100)]
    items[57] = bad
    answer = batch(api, ns, items)
    assert answer.status_code == 400
    assert answer.json()["field"] == field
    assert not Evidence.objects.filter(namespace=ns).exists()


def test_the_batch_itself_is_checked(api, ns):
    assert batch(api, ns, []).json()["field"] == "observations"
    assert batch(api, ns, [facts(i) for i in range(1001)]).json()["field"] == "observations"
    bare = post(api, base(ns) + "observations/batch/", [facts(0)])
    assert bare.status_code == 400
    assert not Evidence.objects.filter(namespace=ns).exists()


def test_a_replayed_batch_stores_nothing_twice(api, ns):
    first = batch(api, ns, [facts(i) for i in range(5)]).json()["results"]
    again = batch(api, ns, [facts(i) for i in range(7)]).json()["results"]
    assert [r["id"] for r in again[:5]] == [r["id"] for r in first]
    assert [r["replayed"] for r in again] == [True] * 5 + [False] * 2
    assert again[5]["seq"] == first[4]["seq"] + 1
    assert Evidence.objects.filter(namespace=ns).count() == 7


def test_a_key_reused_with_another_body_refuses_the_batch(api, ns):
    first = batch(api, ns, [facts(0)]).json()["results"][0]
    answer = batch(api, ns, [facts(1), {**facts(0), "text": "changed"}])
    assert answer.status_code == 409
    assert answer.json()["field"] == "observations[1].idempotency_key"
    assert answer.json()["observation"] == first["id"]
    assert Evidence.objects.filter(namespace=ns).count() == 1


def test_a_key_twice_in_one_batch_is_one_observation_or_a_409(api, ns):
    same = batch(api, ns, [facts(0), facts(1), facts(0)]).json()["results"]
    assert same[2]["id"] == same[0]["id"] and same[2]["replayed"] is True
    clash = batch(api, ns, [facts(5), {**facts(5), "text": "other"}])
    assert clash.status_code == 409 and clash.json()["field"] == "observations[1].idempotency_key"
    assert Evidence.objects.filter(namespace=ns).count() == 2


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_batches_keep_their_order_and_store_each_key_once(make_namespace):
    ns = make_namespace()
    token = token_create(namespace=ns, client="tester").key
    answers: dict[str, list] = {}

    def send(name: str, items: list) -> None:
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
        try:
            answer = api.post(base(ns) + "observations/batch/", json.dumps(
                {"observations": items}), content_type="application/json")
            answers[name] = answer.json()["results"]
        finally:
            connection.close()

    # Both send the keys s0..s49 (the same bodies); each also has its own.
    shared = [facts(i) | {"idempotency_key": f"s{i}"} for i in range(50)]
    a = shared + [{"text": f"a{i}", "idempotency_key": f"a{i}"} for i in range(50)]
    b = [{"text": f"b{i}", "idempotency_key": f"b{i}"} for i in range(50)] + shared
    threads = [threading.Thread(target=send, args=("a", a)),
               threading.Thread(target=send, args=("b", b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows = list(Evidence.objects.filter(namespace=ns).order_by("seq"))
    assert len(rows) == 150  # the shared keys stored once
    by_id = {r.pk: r for r in rows}
    for name in ("a", "b"):
        ids = [r["id"] for r in answers[name]]
        assert len(set(ids)) == 100
        fresh = [by_id[r["id"]].seq for r in answers[name] if not r["replayed"]]
        # What one batch stored is one run of consecutive seqs, in its order.
        assert fresh == list(range(fresh[0], fresh[0] + len(fresh)))
    replayed = answers["a"][0]["replayed"]  # whichever came second replayed the shared keys
    assert [r["replayed"] for r in answers["a"][:50]] == [replayed] * 50
    assert [r["replayed"] for r in answers["b"][50:]] == [not replayed] * 50
    assert [r["id"] for r in answers["a"][:50]] == [r["id"] for r in answers["b"][50:]]


def test_a_source_the_token_may_not_claim_refuses_the_batch_naming_the_item(ns):
    from memory.services import trust_set

    trust_set(namespace=ns, source="hr", level=9, actor="cli")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION="Token " + token_create(
        namespace=ns, client="agent", scope="write").key)
    answer = batch(api, ns, [facts(0), facts(1) | {"source": "hr"}])
    assert answer.status_code == 403
    assert answer.json()["field"] == "observations[1].source"
    assert not Evidence.objects.filter(namespace=ns).exists()
