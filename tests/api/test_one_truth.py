"""One truth across paths (SPEC §11, CONTRACT "Reads see what was acknowledged"): one score
scale with and without a filter, metadata carried forward, the key's ordinals accepted wherever
a version is named, a new namespace that reads as empty, facts with text not extracted again,
and every metric family exposed from the start."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytestmark = pytest.mark.django_db


def url(ns: Any, path: str) -> str:
    return f"/api/v1/namespaces/{ns.name}/{path}"


def post(api: Any, ns: Any, path: str, body: dict[str, Any]) -> Any:
    return api.post(url(ns, path), json.dumps(body), content_type="application/json")


def write(api: Any, ns: Any, *facts: dict[str, Any], **extra: Any) -> dict[str, Any]:
    answer = post(api, ns, "observations/?wait=1", {"facts": list(facts), **extra})
    assert answer.status_code == 201, answer.json()
    return answer.json()


# --- min_score: one scale ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["frontier", "frontier_cosine"])
def test_a_filter_narrows_the_read_and_never_rescales_its_scores(api, ns, mode):
    write(api, ns, {"key": "bob_city", "value": "Lisbon", "metadata": {"user": "bob"}},
          {"key": "bob_food", "value": "pizza", "metadata": {"user": "bob"}},
          {"key": "alice_city", "value": "Oslo", "metadata": {"user": "alice"}})
    query = {"query": "which city does bob live in", "mode": mode, "k": 5}
    plain = post(api, ns, "read/", query).json()
    narrowed = post(api, ns, "read/", {**query, "filter": {"user": "bob"}}).json()
    assert narrowed["mode"] == plain["mode"] == mode
    scores = {i["key"]: i["score"] for i in plain["items"]}
    assert [i["key"] for i in narrowed["items"]] == [
        i["key"] for i in plain["items"] if i["key"].startswith("bob_")]
    assert {i["key"]: i["score"] for i in narrowed["items"]} == {
        k: s for k, s in scores.items() if k.startswith("bob_")}
    cutoff = min(i["score"] for i in narrowed["items"])
    cut = post(api, ns, "read/", {**query, "filter": {"user": "bob"}, "min_score": cutoff}).json()
    assert [i["key"] for i in cut["items"]] == [i["key"] for i in narrowed["items"]]
