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


# --- metadata carries forward ------------------------------------------------------------------


def op(api: Any, ns: Any, key: str, body: dict[str, Any]) -> dict[str, Any]:
    answer = post(api, ns, f"cells/{key}/operations/", body)
    assert answer.status_code == 201, answer.json()
    return answer.json()


def bob_cells(api: Any, ns: Any) -> list[tuple[str, str]]:
    answer = api.get(url(ns, "cells/"), {"filter": json.dumps({"user": "bob"})})
    return [(c["key"], c["value"]) for c in answer.json()["results"]]


def test_metadata_carries_through_update_contest_resolve_and_overlays_key_by_key(api, ns):
    write(api, ns, {"key": "bob_city", "value": "Lisbon", "metadata": {"user": "bob", "n": 1}})
    write(api, ns, {"key": "bob_city", "value": "Porto"})
    write(api, ns, {"key": "bob_city", "value": "Faro", "op": "contest"})
    assert bob_cells(api, ns) == [("bob_city", "Porto")]
    op(api, ns, "bob_city", {"op": "resolve", "value": "Faro"})
    assert bob_cells(api, ns) == [("bob_city", "Faro")]
    write(api, ns, {"key": "bob_city", "value": "Braga", "metadata": {"n": 2}})
    cell = api.get(url(ns, "cells/bob_city/")).json()
    assert cell["metadata"] == {"user": "bob", "n": 2}
    read = post(api, ns, "read/", {"query": "bob city", "filter": {"user": "bob"}}).json()
    assert [i["value"] for i in read["items"]] == ["Braga"]


def test_metadata_carries_through_a_restore_and_a_reinstatement(api, ns):
    write(api, ns, {"key": "bob_pet", "value": "cat", "metadata": {"user": "bob"}})
    write(api, ns, {"key": "bob_pet", "value": "dog"})
    retracted = op(api, ns, "bob_pet", {"op": "revoke", "reason": "wrong"})
    assert retracted["cell"]["value"] == "cat"  # the predecessor reinstated, with its own
    assert bob_cells(api, ns) == [("bob_pet", "cat")]
    history = api.get(url(ns, "cells/bob_pet/")).json()["history"]
    dog = next(h for h in history if h["value"] == "dog")
    op(api, ns, "bob_pet", {"op": "restore", "version": dog["version"],
                            "metadata": {"restored": True}})
    cell = api.get(url(ns, "cells/bob_pet/")).json()
    assert (cell["value"], cell["metadata"]) == ("dog", {"user": "bob", "restored": True})
    contested = op(api, ns, "bob_pet", {"op": "contest", "value": "parrot",
                                        "metadata": {"by": "alice"}})
    alt = contested["cell"]["alternatives"][0]
    assert alt["metadata"] == {"user": "bob", "restored": True, "by": "alice"}


# --- one numbering -----------------------------------------------------------------------------


def test_a_version_is_named_by_its_ordinal_wherever_a_version_is_taken(api, ns):
    write(api, ns, {"key": "door", "value": "open"})
    write(api, ns, {"key": "door", "value": "shut"})
    retracted = op(api, ns, "door", {"op": "revoke", "reason": "wrong", "version": "v2"})
    assert (retracted["cell"]["value"], retracted["cell"]["ordinal"]) == ("open", 1)
    restored = op(api, ns, "door", {"op": "restore", "version": "v2"})
    assert (restored["cell"]["value"], restored["cell"]["ordinal"]) == ("shut", 3)
    write(api, ns, {"key": "door", "value": "ajar", "op": "contest"})
    done = write(api, ns, {"key": "door", "op": "resolve", "version": "v4", "reason": "seen"})
    assert [(o["op"], o["ordinal"]) for o in done["operations"]] == [("resolve", 4)]
    assert api.get(url(ns, "cells/door/")).json()["value"] == "ajar"
    missing = post(api, ns, "cells/door/operations/", {"op": "restore", "version": "v9"})
    assert missing.status_code == 409 and "v9" in missing.json()["error"]
    noop = write(api, ns, {"key": "door", "op": "revoke", "version": "v9", "reason": "x"})
    assert "v9 is not a version of this key" in noop["operations"][0]["reason"]
    for bad in ("3", "v0", "V3", 0, True, "v-1"):
        refused = post(api, ns, "cells/door/operations/", {"op": "restore", "version": bad})
        assert refused.status_code == 400 and refused.json()["field"] == "version", bad


# --- facts with text ---------------------------------------------------------------------------


def test_text_sent_with_facts_is_their_evidence_and_is_not_extracted_again(api, ns):
    said = write(api, ns, {"key": "thermostat", "value": "21 C"},
                 text="thermostat_reading_1 = 21 (living room, morning)")
    assert [o["key"] for o in said["operations"]] == ["thermostat"]
    assert [c["key"] for c in api.get(url(ns, "cells/")).json()["results"]] == ["thermostat"]
    raw = post(api, ns, "read/", {"query": "thermostat", "mode": "raw"}).json()
    assert raw["items"][0]["text"] == "thermostat_reading_1 = 21 (living room, morning)"
    asked = write(api, ns, {"key": "thermostat", "value": "22 C"},
                  text="thermostat_reading_2 = 22", extract=True)
    assert sorted(o["key"] for o in asked["operations"]) == ["thermostat",
                                                            "thermostat_reading_2"]
    refused = post(api, ns, "observations/", {"facts": [{"key": "a", "value": "b"}],
                                              "extract": "yes"})
    assert refused.status_code == 400 and refused.json()["field"] == "extract"
