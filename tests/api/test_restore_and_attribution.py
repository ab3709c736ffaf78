"""Restore and attribution in the API: ``restore`` on the cell-operations endpoint (SPEC §3), the actor,
method and source of every operation, the log's filters (CONTRACT), and an observation that
yields no fact saying so."""

from __future__ import annotations

import json

import pytest

from memory.models import Operation, SupportEdge, Version
from memory.services import operation_apply

pytestmark = pytest.mark.django_db


def base(ns) -> str:
    return f"/api/v1/namespaces/{ns.name}/"


def post(api, url, body):
    return api.post(url, json.dumps(body), content_type="application/json")


def observe(api, ns, commit_pending, **body):
    r = post(api, base(ns) + "observations/", body)
    assert r.status_code == 202, r.content
    commit_pending()
    return api.get(base(ns) + f"observations/{r.json()['id']}/").json()


# --- restore ------------------------------------------------------------------------------------


def test_restore_undoes_a_retraction_as_an_audited_operation(api, ns, commit_pending):
    observe(api, ns, commit_pending, facts=[{"key": "home_city", "value": "Paris"}],
            source="crm-sync")
    tokyo = observe(api, ns, commit_pending, facts=[{"key": "home_city", "value": "Tokyo"}],
                    source="agent:planner")
    tokyo_version = tokyo["operations"][0]["version"]
    r = post(api, base(ns) + "cells/home_city/operations/",
             {"op": "revoke", "reason": "reported in error"})
    assert r.status_code == 201 and r.json()["cell"]["value"] == "Paris"
    r = post(api, base(ns) + "cells/home_city/operations/",
             {"op": "restore", "version": tokyo_version, "reason": "the retraction was a mistake"})
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["cell"]["value"] == "Tokyo" and body["cell"]["status"] == "active"
    operation = body["operation"]
    assert (operation["op"], operation["actor"], operation["method"]) == (
        "restore", "api:tester", "explicit")
    assert operation["reason"] == "the retraction was a mistake"
    new = Version.objects.get(pk=body["cell"]["version"])
    assert new.pk != tokyo_version and new.restores_id == tokyo_version
    assert Version.objects.get(pk=tokyo_version).status == "revoked"  # the mistake stays
    # it carries the restored version's evidence: the agent's observation supports it too
    assert set(SupportEdge.objects.filter(version=new).values_list("evidence__source", flat=True)
               ) == {None, "agent:planner"}
    assert new.support == 2


def test_restore_undoes_a_rejection(api, ns):
    operation_apply(namespace=ns, key="k", op="accept", value="a", actor="user:t")
    operation_apply(namespace=ns, key="k", op="reject", value="b", actor="user:t")
    a = Version.objects.get(cell__namespace=ns, value="a")
    assert a.status == "contradicted"
    r = post(api, base(ns) + "cells/k/operations/", {"op": "restore", "version": a.pk})
    assert r.status_code == 201 and r.json()["cell"]["value"] == "a"


@pytest.mark.parametrize("body, status, field", [
    ({"op": "restore"}, 400, "version"),
    ({"op": "restore", "version": "x"}, 400, "version"),
])
def test_restore_without_a_version_is_400_naming_it(api, ns, body, status, field):
    operation_apply(namespace=ns, key="k", op="accept", value="a", actor="user:t")
    r = post(api, base(ns) + "cells/k/operations/", body)
    assert r.status_code == status and field in json.dumps(r.json())


def test_restore_of_a_version_that_is_not_retracted_is_409_and_writes_nothing(api, ns):
    operation_apply(namespace=ns, key="k", op="accept", value="a", actor="user:t")
    operation_apply(namespace=ns, key="k", op="accept", value="b", actor="user:t")
    a = Version.objects.get(cell__namespace=ns, value="a")
    before = Operation.objects.count()
    r = post(api, base(ns) + "cells/k/operations/", {"op": "restore", "version": a.pk})
    assert r.status_code == 409
    assert r.json()["error"] == (f"invalid: restore needs a revoked or contradicted version "
                                 f"(version {a.pk} is superseded)")
    assert Operation.objects.count() == before


def test_restore_of_another_keys_version_is_409(api, ns):
    operation_apply(namespace=ns, key="k", op="accept", value="a", actor="user:t")
    operation_apply(namespace=ns, key="other", op="accept", value="z", actor="user:t")
    operation_apply(namespace=ns, key="other", op="revoke", actor="user:t")
    z = Version.objects.get(cell__namespace=ns, value="z")
    r = post(api, base(ns) + "cells/k/operations/", {"op": "restore", "version": z.pk})
    assert r.status_code == 409 and "not a version of this key" in r.json()["error"]


def test_an_observation_cannot_carry_restore(api, ns):
    r = post(api, base(ns) + "observations/",
             {"facts": [{"key": "k", "op": "restore", "version": 1}]})
    assert r.status_code == 400 and "op" in json.dumps(r.json())


def test_a_write_token_may_not_restore(ns, client_for):
    from rest_framework.test import APIClient

    from memory.services import token_create

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION="Token " + token_create(
        namespace=ns, client="agent", scope="write").key)
    operation_apply(namespace=ns, key="k", op="accept", value="a", actor="user:t")
    r = post(api, base(ns) + "cells/k/operations/", {"op": "restore", "version": 1})
    assert r.status_code == 403


# --- attribution --------------------------------------------------------------------------------


def test_an_agents_write_is_signed_by_its_token_with_the_method_and_source(
        ns, client_for, commit_pending):
    agent = client_for(ns, client="planner")
    body = observe(agent, ns, commit_pending, text="home_city = Paris", source="agent:planner")
    [op] = body["operations"]
    assert (op["actor"], op["method"], op["source"]) == ("api:planner", "rule", "agent:planner")
    body = observe(agent, ns, commit_pending, facts=[{"key": "home_city", "op": "revoke"}],
                   source="agent:planner")
    assert [(o["op"], o["actor"], o["method"]) for o in body["operations"]] == [
        ("revoke", "api:planner", "explicit")]
    log = agent.get(base(ns) + "operations/").json()["results"]
    assert {(o["actor"], o["source"]) for o in log} == {("api:planner", "agent:planner")}
    assert {o["method"] for o in log} == {"rule", "explicit"}


def test_a_rollback_row_names_who_caused_it_and_the_reinstate_method(api, ns):
    operation_apply(namespace=ns, key="k", op="accept", value="a", actor="user:t")
    operation_apply(namespace=ns, key="k", op="accept", value="b", actor="user:t")
    post(api, base(ns) + "cells/k/operations/", {"op": "revoke", "reason": "no"})
    rows = api.get(base(ns) + "operations/?key=k").json()["results"]
    assert [(o["op"], o["actor"], o["method"]) for o in rows[:2]] == [
        ("reinstate", "api:tester", "reinstate"), ("revoke", "api:tester", "explicit")]


# --- the log's filters --------------------------------------------------------------------------


@pytest.fixture
def mixed_log(ns, client_for, commit_pending):
    a, b = client_for(ns, client="planner"), client_for(ns, client="crm")
    observe(a, ns, commit_pending, text="alice_home_city = Paris", source="agent:planner")
    observe(b, ns, commit_pending, text="alice_home_city = Lyon\nbob_phone = 123",
            source="crm-sync")
    operation_apply(namespace=ns, key="alice_home_city", op="revoke", actor="user:rev",
                    reason="typo")
    return a


@pytest.mark.parametrize("query, expected", [
    ("actor=api:crm", {("alice_home_city", "accept"), ("bob_phone", "accept")}),
    ("source=agent:planner", {("alice_home_city", "accept")}),
    ("op=revoke", {("alice_home_city", "revoke")}),
    ("op=reinstate&key=alice_home_city", {("alice_home_city", "reinstate")}),
    ("key_contains=alice home", {("alice_home_city", "accept"), ("alice_home_city", "revoke"),
                                 ("alice_home_city", "reinstate")}),
    ("key_contains=PHONE", {("bob_phone", "accept")}),
    ("key=bob_phone&actor=user:rev", set()),
])
def test_the_log_filters_by_actor_source_op_key_and_key_part(mixed_log, ns, query, expected):
    r = mixed_log.get(base(ns) + "operations/?" + query)
    assert r.status_code == 200
    assert {(o["key"], o["op"]) for o in r.json()["results"]} == expected


def test_an_unknown_op_filter_is_400_naming_it(mixed_log, ns):
    r = mixed_log.get(base(ns) + "operations/?op=delete")
    assert r.status_code == 400 and "op" in r.json()["error"] + json.dumps(r.json())


def test_filters_survive_paging(mixed_log, ns):
    r = mixed_log.get(base(ns) + "operations/?key_contains=alice&limit=1").json()
    assert "key_contains=alice" in r["next"]
    second = mixed_log.get(r["next"]).json()
    assert second["results"][0]["key"] == "alice_home_city"
    assert second["results"][0]["id"] < r["results"][0]["id"]


# --- an observation that yields no fact ----------------------------------------------------------


def test_an_observation_with_no_fact_says_so(api, ns, commit_pending):
    body = observe(api, ns, commit_pending, text="Dave told me his new manager is Zed.")
    assert body["status"] == "committed" and body["operations"] == []
    assert body["facts_found"] == 0
    assert body["note"].startswith("No fact found: the rule extractor")
    ok = observe(api, ns, commit_pending, text="dave_manager = Zed")
    assert ok["facts_found"] == 1 and ok["note"] == ""
