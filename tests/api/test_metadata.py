"""Facts' metadata, filters, the relevance cutoff and the ordinals beside version ids: kept with
the version a fact creates, returned with cells, history, reads and graphs, filtered through an
index, refused with the field named when it is not a flat object."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection, transaction

from memory.selectors import filtered
from memory.selectors.filtered import _EXACT_SQL, _MATCH
from memory.services import operation_apply

pytestmark = pytest.mark.django_db


def url(ns: Any, path: str) -> str:
    return f"/api/v1/namespaces/{ns.name}/{path}"


def post(api: Any, ns: Any, path: str, body: dict[str, Any]) -> Any:
    return api.post(url(ns, path), json.dumps(body), content_type="application/json")


def remember(api: Any, ns: Any, commit: Any, *facts: dict[str, Any], **extra: Any) -> None:
    answer = post(api, ns, "observations/", {"facts": list(facts), **extra})
    assert answer.status_code == 202, answer.json()
    commit()


def test_metadata_stays_with_the_version_its_fact_created(api, ns, commit_pending):
    remember(api, ns, commit_pending, {"key": "food", "value": "sushi",
                                       "metadata": {"user": "u1", "turn": 3, "sure": True}})
    remember(api, ns, commit_pending, {"key": "food", "value": "ramen"})
    remember(api, ns, commit_pending, {"key": "food", "value": "ramen",
                                       "metadata": {"user": "other"}})  # support: no version
    # A version without metadata of its own starts from the head it displaces (SPEC §11.4).
    first = {"user": "u1", "turn": 3, "sure": True}
    cell = api.get(url(ns, "cells/food/")).json()
    assert (cell["value"], cell["ordinal"], cell["metadata"]) == ("ramen", 2, first)
    assert [(h["value"], h["ordinal"], h["metadata"]) for h in cell["history"]] == [
        ("ramen", 2, first), ("sushi", 1, first)]
    page = api.get(url(ns, "cells/food/history/")).json()
    assert [h["metadata"] for h in page["results"]] == [first, first]
    listed = api.get(url(ns, "cells/")).json()["results"][0]
    assert [(h["ordinal"], h["metadata"] is None) for h in listed["history"]] == [
        (2, False), (1, False)]


def test_every_version_id_has_its_ordinal_beside_it(api, ns, commit_pending):
    remember(api, ns, commit_pending, {"key": "door", "value": "open", "metadata": {"by": "a"}})
    remember(api, ns, commit_pending, {"key": "door", "value": "shut"})
    answer = post(api, ns, "observations/?wait=1", {"facts": [{"key": "door", "value": "ajar",
                                                               "op": "contest"}]})
    seen = api.get(url(ns, f"observations/{answer.json()['id']}/")).json()
    commit_pending()
    seen = api.get(url(ns, f"observations/{answer.json()['id']}/")).json()
    assert [(o["op"], o["ordinal"]) for o in seen["operations"]] == [("contest", 3)]
    cell = api.get(url(ns, "cells/door/")).json()
    assert [(a["value"], a["ordinal"]) for a in cell["alternatives"]] == [("ajar", 3)]
    log = api.get(url(ns, "operations/")).json()["results"]
    assert [(o["op"], o["ordinal"]) for o in log] == [("contest", 3), ("accept", 2),
                                                      ("accept", 1)]
    graph = api.get(url(ns, "cells/door/graph/")).json()
    versions = {n["ordinal"]: n["metadata"] for n in graph["nodes"] if n["kind"] == "version"}
    assert versions == {1: {"by": "a"}, 2: {"by": "a"}, 3: {"by": "a"}}  # carried forward
    assert sorted(n["ordinal"] for n in graph["nodes"] if n["kind"] == "operation") == [1, 2, 3]
    read = post(api, ns, "read/", {"query": "door"}).json()
    assert [(i["ordinal"], i["metadata"]) for i in read["items"]] == [(2, {"by": "a"})]
    resolved = post(api, ns, "cells/door/operations/", {"op": "resolve", "value": "ajar"})
    assert resolved.json()["operation"]["ordinal"] == 3


@pytest.mark.parametrize("metadata,why", [
    ({"user": {"id": 1}}, "flat"), ({"tags": ["a"]}, "flat"), ({"user": None}, "null"),
    ({"": "x"}, "1 to 64"), ({"k" * 65: "x"}, "1 to 64"), ({"k": "x" * 501}, "500"),
    ({f"k{i}": i for i in range(33)}, "32 entries"), ({"n": 2**60}, "integers"),
    ("user=u1", "an object"), ({"k": "a\u0000b"}, "NUL"),
])
def test_what_is_not_flat_bounded_metadata_is_refused_naming_the_field(api, ns, metadata, why):
    answer = post(api, ns, "observations/", {"facts": [{"key": "k", "value": "v",
                                                        "metadata": metadata}]})
    assert answer.status_code == 400
    body = answer.json()
    assert body["field"] == "facts[0].metadata" and why in body["error"], body


def test_the_same_idempotency_key_with_other_metadata_is_a_conflict(api, ns):
    body = {"facts": [{"key": "k", "value": "v", "metadata": {"a": 1}}], "idempotency_key": "i"}
    assert post(api, ns, "observations/", body).status_code == 202
    assert post(api, ns, "observations/", body).json()["replayed"] is True
    again = {**body, "facts": [{"key": "k", "value": "v", "metadata": {"a": 2}}]}
    assert post(api, ns, "observations/", again).status_code == 409


@pytest.fixture
def users(api, ns, commit_pending):
    remember(api, ns, commit_pending,
             {"key": "alice_food", "value": "sushi", "metadata": {"user": "alice", "n": 1}},
             {"key": "bob_food", "value": "pizza", "metadata": {"user": "bob", "n": 1.0}},
             {"key": "carol_food", "value": "tacos", "metadata": {"user": "carol", "n": True}},
             {"key": "weather", "value": "rain"})
    return ns


def test_the_frontier_list_filters_by_metadata(api, users):
    def keys(metadata: Any) -> list[str]:
        answer = api.get(url(users, "cells/"), {"filter": json.dumps(metadata)})
        assert answer.status_code == 200, answer.json()
        return [c["key"] for c in answer.json()["results"]]

    assert keys({"user": "alice"}) == ["alice_food"]
    assert keys({"n": 1}) == ["alice_food", "bob_food"]  # 1 and 1.0; never true
    assert keys({"n": True}) == ["carol_food"]
    assert keys({"user": "alice", "n": 2}) == []
    assert len(keys({})) == 4  # an empty filter filters nothing
    bad = api.get(url(users, "cells/"), {"filter": "{user: alice}"})
    assert bad.status_code == 400 and bad.json()["field"] == "filter"


def test_a_filter_follows_the_current_version(api, users, commit_pending):
    remember(api, users, commit_pending, {"key": "alice_food", "value": "ramen",
                                          "metadata": {"user": "dave"}})
    answer = api.get(url(users, "cells/"), {"filter": json.dumps({"user": "alice"})})
    assert answer.json()["results"] == []  # the head's own entry overlays the carried one
    read = post(api, users, "read/", {"query": "food", "filter": {"user": "alice"}}).json()
    assert read["items"] == []


def test_the_frontier_read_filters_by_metadata(api, users):
    read = post(api, users, "read/", {"query": "what food", "filter": {"user": "bob"}})
    assert read.status_code == 200, read.json()
    body = read.json()
    assert [i["key"] for i in body["items"]] == ["bob_food"]
    assert body["context"].splitlines()[1:] == ["bob_food = pizza"]
    assert body["items"][0]["metadata"] == {"user": "bob", "n": 1.0}
    raw = post(api, users, "read/", {"query": "food", "mode": "raw", "filter": {"user": "bob"}})
    assert raw.status_code == 400 and raw.json()["field"] == "filter"


def test_filters_read_the_past_too(api, users, commit_pending):
    from django.utils import timezone

    before = timezone.now().isoformat()
    remember(api, users, commit_pending, {"key": "alice_food", "value": "ramen",
                                          "metadata": {"user": "alice", "n": 2}})
    then = api.get(url(users, "cells/"), {"filter": json.dumps({"n": 1}), "as_of": before})
    assert [c["key"] for c in then.json()["results"]] == ["alice_food", "bob_food"]
    now = api.get(url(users, "cells/"), {"filter": json.dumps({"n": 1})})
    assert [c["key"] for c in now.json()["results"]] == ["bob_food"]
    read = post(api, users, "read/", {"query": "alice food", "filter": {"user": "alice"},
                                      "as_of": before}).json()
    assert [(i["key"], i["value"], i["metadata"]) for i in read["items"]] == [
        ("alice_food", "sushi", {"user": "alice", "n": 1})]


def test_a_broad_filter_walks_the_frontier_index_and_stays_exact(api, users, monkeypatch):
    exact = post(api, users, "read/", {"query": "food", "filter": {"n": 1}, "k": 1}).json()
    monkeypatch.setattr(filtered, "EXACT_AT_MOST", 1)  # two matches: more than "a few"
    walked = post(api, users, "read/", {"query": "food", "filter": {"n": 1}, "k": 1}).json()
    assert walked["items"] == exact["items"] and len(walked["items"]) == 1
    both = post(api, users, "read/", {"query": "food", "filter": {"n": 1}, "k": 5}).json()
    assert sorted(i["key"] for i in both["items"]) == ["alice_food", "bob_food"]


def test_a_filter_is_looked_up_in_the_index_of_heads_metadata(api, ns, commit_pending):
    """The filtered read's condition on versions matches version_head_metadata_idx (its
    expression and predicate), so the heads of a namespace that carry a filter's entries are
    found in it. A table this small is scanned faster than any index is read: scans are priced
    out."""
    for start in (0, 300):
        remember(api, ns, commit_pending, *[{"key": f"item_{i}", "value": f"v{i}",
                                             "metadata": {"user": f"u{i % 50}"}}
                                            for i in range(start, start + 300)])
    params = {"q": "[" + ",".join(["0.1"] * 384) + "]", "ns": ns.pk,
              "filter": json.dumps({"user": "u7"}), "cap": None}
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute("ANALYZE memory_version")
        cur.execute("SET LOCAL enable_seqscan = off")
        cur.execute("EXPLAIN SELECT v.id FROM memory_version v WHERE " + _MATCH, params)
        plan = "\n".join(r[0] for r in cur.fetchall())
        cur.execute(_EXACT_SQL, params)
        assert len(cur.fetchall()) == 12
    assert "Bitmap Index Scan on version_head_metadata_idx" in plan, plan


def test_min_score_cuts_the_lines_below_it(api, users):
    """Whatever the embedder: the scores of a read without a cutoff decide a cutoff between
    the most and the least relevant line, and the read with it keeps only those above."""
    every = post(api, users, "read/", {"query": "pizza bob food", "k": 10}).json()["items"]
    scores = sorted(i["score"] for i in every)
    assert len(scores) == 4 and scores[0] < scores[-1]
    cutoff = (scores[0] + scores[-1]) / 2
    kept = post(api, users, "read/", {"query": "pizza bob food", "k": 10,
                                      "min_score": cutoff}).json()
    assert kept["items"] and all(i["score"] >= cutoff for i in kept["items"])
    assert len(kept["items"]) < 4 and "below min_score" in kept["note"]
    assert kept["context"].splitlines()[1:] == [i["line"] for i in kept["items"]]
    none = post(api, users, "read/", {"query": "pizza", "min_score": 1.0}).json()
    assert none["items"] == [] or all(i["score"] >= 1.0 for i in none["items"])
    raw = post(api, users, "read/", {"query": "pizza", "mode": "raw", "min_score": 1.0}).json()
    assert raw["context"].splitlines()[1:] == [i["text"] for i in raw["items"]]
    for bad in (2.5, -1.5, "0.5", True):
        answer = post(api, users, "read/", {"query": "pizza", "min_score": bad})
        assert answer.status_code == 400 and answer.json()["field"] == "min_score", bad


def test_a_restore_brings_back_the_metadata_of_what_it_restores(api, ns, commit_pending):
    remember(api, ns, commit_pending, {"key": "pet", "value": "cat", "metadata": {"src": "a"}})
    remember(api, ns, commit_pending, {"key": "pet", "value": "dog"})
    first = api.get(url(ns, "cells/pet/")).json()["history"][-1]["version"]
    operation_apply(namespace=ns, key="pet", op="reject", actor="user:t")
    operation_apply(namespace=ns, key="pet", op="revoke", actor="user:t")
    answer = post(api, ns, "cells/pet/operations/", {"op": "restore", "version": first})
    assert answer.status_code == 201, answer.json()
    cell = answer.json()["cell"]
    assert (cell["value"], cell["metadata"]) == ("cat", {"src": "a"})


def test_min_score_drops_the_pet_from_a_question_about_food(api, ns, commit_pending):
    """The read that once answered "What do I like to eat?" with ``pet = cat``: with the
    embedder the settings give (hashing: shared words; a semantic one: meaning), the food line
    scores above the pet line, and a cutoff between them keeps the food and drops the pet."""
    remember(api, ns, commit_pending, {"key": "favorite_food", "value": "sushi"},
             {"key": "pet", "value": "cat"})
    query = "what food do I like to eat"
    every = post(api, ns, "read/", {"query": query}).json()["items"]
    scores = {i["key"]: i["score"] for i in every}
    assert scores["favorite_food"] > scores["pet"], scores
    cutoff = (scores["favorite_food"] + scores["pet"]) / 2
    kept = post(api, ns, "read/", {"query": query, "min_score": cutoff}).json()
    assert [i["key"] for i in kept["items"]] == ["favorite_food"]
    assert "pet" not in kept["context"]
