"""The HTTP API of CONTRACT.md, endpoint by endpoint and error class by error class."""

from __future__ import annotations

import json
import threading

import pytest
from django.db import connection

from memory.models import EraseAudit, Evidence, Operation
from memory.services import namespace_create, operation_apply
from memory.services.erase import key_digest

pytestmark = pytest.mark.django_db


def base(ns) -> str:
    return f"/api/v1/namespaces/{ns.name}/"


def post(api, url, body, **extra):
    return api.post(url, json.dumps(body), content_type="application/json", **extra)


def accept(ns, key, value):
    return operation_apply(namespace=ns, key=key, op="accept", value=value, actor="user:t")


# --- observations ----------------------------------------------------------------------------


def test_observation_is_stored_with_seq_before_the_answer(api, ns):
    r = post(api, base(ns) + "observations/", {"text": "mug_location = table", "source": "cam"})
    assert r.status_code == 202
    body = r.json()
    assert body["status"] == "pending" and body["seq"] == 1
    evidence = Evidence.objects.get(pk=body["id"])
    assert evidence.text == "mug_location = table" and evidence.actor == "api:tester"


def test_observation_commits_and_reports_its_operations(api, ns, commit_pending):
    r = post(api, base(ns) + "observations/",
             {"facts": [{"key": "Mug Location", "value": "table"},
                        {"key": "cup_location", "value": "shelf"}]})
    commit_pending()
    got = api.get(base(ns) + f"observations/{r.json()['id']}/").json()
    assert got["status"] == "committed" and got["error"] == ""
    assert [(o["op"], o["key"], o["value"], o["status"]) for o in got["operations"]] == [
        ("accept", "mug_location", "table", "active"), ("accept", "cup_location", "shelf", "active")]
    assert api.get(base(ns) + "cells/mug_location/").json()["value"] == "table"


def test_structured_fact_ops_apply_as_asked(api, ns, commit_pending):
    accept(ns, "day", "Tuesday")
    post(api, base(ns) + "observations/", {"facts": [{"key": "day", "value": "Thursday",
                                                       "op": "contest"}]})
    commit_pending()
    cell = api.get(base(ns) + "cells/day/").json()
    assert cell["status"] == "contested" and cell["alternatives"][0]["value"] == "Thursday"


def test_invalid_structured_op_becomes_logged_noop_not_an_error(api, ns, commit_pending):
    r = post(api, base(ns) + "observations/", {"facts": [{"key": "ghost", "op": "revoke"}]})
    commit_pending()
    got = api.get(base(ns) + f"observations/{r.json()['id']}/").json()
    assert got["status"] == "committed"
    assert got["operations"][0]["op"] == "noop" and "invalid" in got["operations"][0]["reason"]


def test_idempotency_key_replay_returns_first_observation_and_changes_nothing(api, ns):
    body = {"text": "a = 1", "idempotency_key": "req-42"}
    first = post(api, base(ns) + "observations/", body).json()
    assert first["replayed"] is False
    again = post(api, base(ns) + "observations/", dict(reversed(body.items())))
    assert again.status_code == 202 and again["Idempotent-Replayed"] == "true"
    assert again.json()["id"] == first["id"] and again.json()["replayed"] is True
    assert Evidence.objects.filter(namespace=ns).count() == 1


@pytest.mark.django_db(transaction=True)
def test_seq_strictly_increasing_under_concurrent_posts(make_namespace, client_for):
    ns = make_namespace("seq")
    seqs: list[int] = []
    lock = threading.Lock()

    def poster() -> None:
        api = client_for(ns)
        for i in range(5):
            r = post(api, base(ns) + "observations/", {"text": f"k = {i}"})
            with lock:
                seqs.append(r.json()["seq"])
        connection.close()

    threads = [threading.Thread(target=poster) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(seqs) == list(range(1, 31))
    rows = list(Evidence.objects.filter(namespace=ns).order_by("id").values_list("seq", flat=True))
    assert rows == sorted(rows)  # later inserts never carry an earlier seq


def test_observation_of_another_namespace_is_404(api, other_ns):
    from memory.services import observation_record

    foreign = observation_record(namespace=other_ns, text="x = 1").evidence
    assert api.get(f"/api/v1/namespaces/{other_ns.name}/observations/{foreign.id}/").status_code == 404


# --- cells -----------------------------------------------------------------------------------


def test_cell_detail_has_value_status_history_newest_first(api, ns):
    for v in ("a", "b", "c"):
        accept(ns, "k", v)
    cell = api.get(base(ns) + "cells/k/").json()
    assert (cell["value"], cell["status"], cell["support"]) == ("c", "active", 1)
    assert [(h["value"], h["status"]) for h in cell["history"]] == [
        ("c", "active"), ("b", "superseded"), ("a", "superseded")]
    assert cell["history"][1]["valid_to"] is not None and cell["aliases"] == []


def test_unknown_cell_is_404(api, ns):
    r = api.get(base(ns) + "cells/nothing/")
    assert r.status_code == 404 and "nothing" in r.json()["error"]


def test_cells_list_filters_by_status_and_search_and_paginates(api, ns):
    for i in range(5):
        accept(ns, f"key_{i}", f"value {i}")
    operation_apply(namespace=ns, key="key_1", op="contest", value="other", actor="user:t")
    operation_apply(namespace=ns, key="key_2", op="revoke", actor="user:t")
    assert [c["key"] for c in api.get(base(ns) + "cells/?status=contested").json()["results"]] == ["key_1"]
    assert [c["key"] for c in api.get(base(ns) + "cells/?status=empty").json()["results"]] == ["key_2"]
    assert [c["key"] for c in api.get(base(ns) + "cells/?search=value 4").json()["results"]] == ["key_4"]
    page = api.get(base(ns) + "cells/?limit=2").json()
    keys = [c["key"] for c in page["results"]]
    while page["next"]:
        page = api.get(page["next"]).json()
        keys += [c["key"] for c in page["results"]]
    assert keys == [f"key_{i}" for i in range(5)]


def test_cell_graph_has_typed_nodes_and_edges(api, ns):
    accept(ns, "k", "a")
    accept(ns, "k", "b")
    operation_apply(namespace=ns, key="k", op="contest", value="c", actor="user:t")
    operation_apply(namespace=ns, key="k", op="revoke", actor="user:t")
    graph = api.get(base(ns) + "cells/k/graph/").json()
    kinds = sorted({n["kind"] for n in graph["nodes"]})
    assert kinds == ["operation", "tombstone", "version"]
    types = sorted(e["type"] for e in graph["edges"])
    assert types == ["alternative_of", "revokes", "supersedes"]


# --- human operations ------------------------------------------------------------------------


def test_cell_operation_revoke_reinstates_and_records_actor_and_reason(api, ns):
    accept(ns, "k", "a")
    accept(ns, "k", "b")
    r = post(api, base(ns) + "cells/k/operations/", {"op": "revoke", "reason": "wrong sensor"})
    assert r.status_code == 201
    body = r.json()
    assert body["cell"]["value"] == "a"
    assert body["operation"]["actor"] == "api:tester" and body["operation"]["reason"] == "wrong sensor"


def test_cell_operation_invalid_in_state_is_409_with_reason_and_writes_nothing(api, ns):
    accept(ns, "k", "a")
    before = Operation.objects.count()
    r = post(api, base(ns) + "cells/k/operations/", {"op": "resolve", "value": "a"})
    assert r.status_code == 409 and r.json()["error"] == "invalid: resolve needs a contested cell"
    assert Operation.objects.count() == before


@pytest.mark.parametrize("body,value,status", [
    ({"op": "contest", "value": "b"}, "b0", "contested"),
    ({"op": "reject"}, "a", "active"),
    ({"op": "reject", "value": "z"}, "z", "active"),
    ({"op": "noop"}, "b0", "active"),
    ({"op": "accept", "value": "new"}, "new", "active"),
])
def test_every_human_operation_is_applied_through_the_endpoint(api, ns, body, value, status):
    accept(ns, "k", "a")
    accept(ns, "k", "b0")
    r = post(api, base(ns) + "cells/k/operations/", body)
    assert r.status_code == 201, r.json()
    assert r.json()["operation"]["op"] == body["op"]
    assert (r.json()["cell"]["value"], r.json()["cell"]["status"]) == (value, status)


def test_resolve_by_version_and_revoke_of_named_version(api, ns):
    accept(ns, "k", "a")
    operation_apply(namespace=ns, key="k", op="contest", value="b", actor="user:t")
    alt = api.get(base(ns) + "cells/k/").json()["alternatives"][0]["version"]
    r = post(api, base(ns) + "cells/k/operations/", {"op": "resolve", "version": alt})
    assert r.json()["cell"]["value"] == "b"
    first = [h for h in r.json()["cell"]["history"] if h["value"] == "a"][0]["version"]
    r = post(api, base(ns) + "cells/k/operations/", {"op": "revoke", "version": first})
    assert r.status_code == 201 and r.json()["cell"]["value"] == "b"


def test_operation_on_unknown_key_is_404_unless_it_creates(api, ns):
    assert post(api, base(ns) + "cells/new_key/operations/", {"op": "revoke"}).status_code == 404
    r = post(api, base(ns) + "cells/new_key/operations/", {"op": "accept", "value": "v"})
    assert r.status_code == 201 and r.json()["cell"]["value"] == "v"


def test_operation_log_newest_first_filtered_by_key_and_paginated(api, ns):
    for v in ("a", "b", "c"):
        accept(ns, "k", v)
    accept(ns, "other", "x")
    log = api.get(base(ns) + "operations/?key=k&limit=2").json()
    assert [o["value"] for o in log["results"]] == ["c", "b"]
    assert [o["value"] for o in api.get(log["next"]).json()["results"]] == ["a"]


# --- reads -----------------------------------------------------------------------------------


def test_frontier_read_shows_current_values_and_not_stale_ones(api, ns, commit_pending):
    post(api, base(ns) + "observations/", {"text": "Earlier observation: mug 1 was in countertop 1."})
    post(api, base(ns) + "observations/", {"text": "Update: mug 1 has been moved from countertop 1 to cabinet 3."})
    post(api, base(ns) + "observations/", {"text": "alice_city = Paris"})
    commit_pending()
    r = post(api, base(ns) + "read/", {"query": "where is mug 1 now?", "mode": "frontier", "k": 1})
    body = r.json()
    assert r.status_code == 200 and body["items"][0]["key"] == "mug_1_location"
    assert "mug_1_location = cabinet 3" in body["context"] and "countertop" not in body["context"]
    assert body["context_chars"] == len(body["context"])
    history = post(api, base(ns) + "read/", {"query": "mug 1", "k": 1, "disclose": ["history"]}).json()
    assert "countertop 1 (superseded)" in history["context"]


def test_raw_reads_return_evidence_and_ordered_tags(api, ns, commit_pending):
    for text in ("Earlier observation: mug 1 was in countertop 1.",
                 "Update: mug 1 has been moved from countertop 1 to cabinet 3."):
        post(api, base(ns) + "observations/", {"text": text})
    commit_pending()
    raw = post(api, base(ns) + "read/", {"query": "mug 1", "mode": "raw", "k": 5}).json()
    assert len(raw["items"]) == 2 and "countertop 1" in raw["context"]  # stale value re-enters
    ordered = post(api, base(ns) + "read/", {"query": "mug 1", "mode": "raw_ordered"}).json()
    lines = ordered["context"].splitlines()[1:]
    assert lines[0].startswith("[t=1] ") and lines[1].startswith("[t=2] ")


def test_pruned_read_without_a_model_says_so(api, ns):
    body = post(api, base(ns) + "read/", {"query": "q", "mode": "pruned"}).json()
    assert body["available"] is False and "needs a model" in body["note"]


# --- erase -----------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_erase_leaves_no_trace_of_the_values_in_any_table(make_namespace, client_for, commit_pending):
    ns = make_namespace("erase")
    api = client_for(ns)
    post(api, base(ns) + "observations/", {"text": "secret_pin = Zq81Xy"})
    post(api, base(ns) + "observations/", {"text": "secret_pin: Wv27Kk\ncolour = red"})
    commit_pending(ns)
    assert api.get(base(ns) + "cells/secret_pin/").json()["value"] == "Wv27Kk"
    assert api.delete(base(ns) + "cells/secret_pin/").status_code == 204
    assert api.get(base(ns) + "cells/secret_pin/").status_code == 404
    assert api.get(base(ns) + "cells/colour/").json()["value"] == "red"
    audit = EraseAudit.objects.get(namespace=ns)
    # The audit keeps a digest of the key, not its name; no table names it (SPEC §6).
    assert audit.key == key_digest("secret_pin") and audit.versions_erased == 2
    with connection.cursor() as cur:
        cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema='public'")
        tables = [r[0] for r in cur.fetchall()]
        for table in tables:
            cur.execute(f'SELECT count(*) FROM "{table}" t WHERE t::text ILIKE %s'
                        " OR t::text ILIKE %s OR t::text ILIKE %s",
                        ["%Zq81Xy%", "%Wv27Kk%", "%secret_pin%"])
            # Except the change feed's one erase event, which names the key for subscribers
            # for its retention (SPEC §12), and no value.
            named = 1 if table == "memory_changeevent" else 0
            assert cur.fetchone()[0] == named, table
        cur.execute("SELECT op, key, value FROM memory_changeevent WHERE namespace_id = %s"
                    " AND key = 'secret_pin'", [ns.pk])
        assert cur.fetchall() == [("erase", "secret_pin", None)]
    from pmem_site.celery import app

    with app.connection_for_write() as conn:
        client = conn.default_channel.client
        for key in client.keys("*"):
            kind = client.type(key).decode()
            dump = str(client.lrange(key, 0, -1) if kind == "list" else client.dump(key))
            assert "Zq81Xy" not in dump and "Wv27Kk" not in dump


# --- auth ------------------------------------------------------------------------------------


ENDPOINTS = [
    ("post", "observations/", {"text": "a = 1"}),
    ("get", "observations/1/", None),
    ("get", "cells/", None),
    ("get", "cells/k/", None),
    ("get", "cells/k/graph/", None),
    ("post", "cells/k/operations/", {"op": "noop"}),
    ("delete", "cells/k/", None),
    ("get", "operations/", None),
    ("post", "read/", {"query": "k"}),
]


def call(api, method, url, body):
    if method == "post":
        return post(api, url, body)
    return getattr(api, method)(url)


@pytest.mark.parametrize("method,path,body", ENDPOINTS)
def test_a_token_never_reaches_another_namespace(client_for, ns, method, path, body):
    other = namespace_create(name="victim-space")
    accept(other, "k", "secret")
    r = call(client_for(ns), method, f"/api/v1/namespaces/{other.name}/{path}", body)
    assert r.status_code == 404
    assert accept(other, "k", "secret").decision.applied is False  # still there, untouched


@pytest.mark.parametrize("method,path,body", ENDPOINTS)
def test_unauthenticated_requests_are_refused(ns, method, path, body):
    from rest_framework.test import APIClient

    r = call(APIClient(), method, base(ns) + path, body)
    assert r.status_code == 401 and "error" in r.json()
    bad = APIClient()
    bad.credentials(HTTP_AUTHORIZATION="Token nope")
    assert call(bad, method, base(ns) + path, body).status_code == 401


def test_session_user_reaches_member_namespaces_only_and_viewers_cannot_write(ns, other_ns):
    from django.contrib.auth.models import User
    from rest_framework.test import APIClient

    from memory.services import membership_set

    viewer = User.objects.create_user("vera", password="pw")
    membership_set(namespace=ns, user=viewer, role="viewer")
    api = APIClient()
    api.force_authenticate(viewer)
    assert api.get(base(ns) + "cells/").status_code == 200
    assert api.get(base(other_ns) + "cells/").status_code == 404
    assert post(api, base(ns) + "observations/", {"text": "a = 1"}).status_code == 403


# --- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize("body,field", [
    ({}, "text"),
    ({"text": 5}, "text"),
    ({"text": "   "}, "text"),
    ({"facts": "nope"}, "facts"),
    ({"facts": [{"value": "v"}]}, "facts[0].key"),
    ({"facts": [{"key": "k", "op": "explode", "value": "v"}]}, "facts[0].op"),
    ({"facts": [{"key": "k", "op": "accept"}]}, "facts[0].value"),
    ({"facts": [{"key": "k" * 300, "value": "v"}]}, "facts[0].key"),
    ({"facts": [{"key": "!!!", "value": "v"}]}, "facts[0].key"),
    ({"facts": [{"key": "k", "value": "v", "version": "x"}]}, "facts[0].version"),
    ({"text": "a = 1", "observed_at": "yesterday-ish"}, "observed_at"),
    ({"text": "a\x00b"}, "text"),
    ({"facts": [{"key": "k", "value": "v"}] * 501}, "facts"),
])
def test_bad_observations_get_400_naming_the_field(api, ns, body, field):
    r = post(api, base(ns) + "observations/", body)
    assert r.status_code == 400, r.content
    assert r.json()["field"] == field, r.json()
    assert not Evidence.objects.filter(namespace=ns).exists()


def test_malformed_json_is_400(api, ns):
    r = api.post(base(ns) + "observations/", "{not json", content_type="application/json")
    assert r.status_code == 400 and r.json()["error"].startswith("malformed JSON")


def test_oversize_body_is_413(api, ns):
    r = post(api, base(ns) + "observations/", {"text": "x" * 1_200_000})
    assert r.status_code == 413 and "error" in r.json()


@pytest.mark.parametrize("body,field", [
    ({"query": "q", "mode": "psychic"}, "mode"),
    ({"query": "q", "k": 0}, "k"),
    ({"query": "q", "k": 10_000}, "k"),
    ({"query": "q", "disclose": ["secrets"]}, "disclose[0]"),
    ({"mode": "raw"}, "query"),
])
def test_bad_reads_get_400_naming_the_field(api, ns, body, field):
    r = post(api, base(ns) + "read/", body)
    assert r.status_code == 400 and r.json()["field"] == field, r.json()


@pytest.mark.parametrize("body,field", [
    ({"op": "explode"}, "op"),
    ({"op": "accept"}, "value"),
    ({"op": "resolve"}, "value"),
    ({"op": "revoke", "version": -3}, "version"),
])
def test_bad_cell_operations_get_400_naming_the_field(api, ns, body, field):
    accept(ns, "k", "a")
    r = post(api, base(ns) + "cells/k/operations/", body)
    assert r.status_code == 400 and r.json()["field"] == field, r.json()


def test_unknown_api_path_is_json_404(api):
    r = api.get("/api/v1/nowhere/")
    assert r.status_code == 404 and r.json() == {"error": "not found"}


@pytest.mark.parametrize("query,field", [
    ("cells/?search=a%00b", "search"),
    ("cells/?after=a%00b", "after"),
    ("operations/?actor=a%00b", "actor"),
    ("operations/?key=a%00b", "key"),
])
def test_nul_bytes_in_query_parameters_are_400(api, ns, query, field):
    r = api.get(base(ns) + query)
    assert r.status_code == 400 and r.json()["field"] == field


def test_bad_query_parameters_are_400(api, ns):
    assert api.get(base(ns) + "cells/?limit=zero").json()["field"] == "limit"
    assert api.get(base(ns) + "cells/?status=weird").json()["field"] == "status"
    assert post(api, base(ns) + "observations/?wait=maybe", {"text": "a=1"}).json()["field"] == "wait"


def test_healthz_reports_database_and_broker(client):
    body = client.get("/healthz").json()
    assert body == {"status": "ok", "database": "ok", "broker": "ok", "model": "none"}


def test_cells_list_items_have_the_full_cell_shape_in_bounded_queries(api, ns):
    from django.test.utils import CaptureQueriesContext

    for i in range(30):
        accept(ns, f"key_{i:02d}", "a")
        accept(ns, f"key_{i:02d}", "b")
    with CaptureQueriesContext(connection) as queries:
        page = api.get(base(ns) + "cells/?limit=30").json()
    first = page["results"][0]
    assert set(first) >= {"key", "value", "status", "version", "support", "alternatives",
                          "history", "aliases"}
    assert [h["value"] for h in first["history"]] == ["b", "a"]
    assert len(queries) <= 8


def test_graph_operations_name_their_evidence_whose_node_says_why(api, ns, commit_pending):
    # The retraction's observation supports no version, yet it is why the revoke happened:
    # it is an evidence node of the graph, and the operation names it (its text is held once,
    # on that node, not copied into every operation).
    post(api, base(ns) + "observations/", {"text": "Earlier observation: mug 1 was in table 1."})
    post(api, base(ns) + "observations/", {"text": "Update: mug 1 has been moved from table 1 to shelf 2."})
    post(api, base(ns) + "observations/", {"text": "The move of mug 1 to shelf 2 was reported in error."})
    commit_pending()
    graph = api.get(base(ns) + "cells/mug_1_location/graph/").json()
    nodes = {n["id"]: n for n in graph["nodes"]}
    revoke = next(n for n in graph["nodes"] if n["kind"] == "operation" and n["label"] == "revoke")
    why = nodes[f"e{revoke['evidence']}"]
    assert why["text"] == "The move of mug 1 to shelf 2 was reported in error."
    assert (why["kind"], why["seq"], why["text_truncated"]) == ("evidence", revoke["seq"], False)
    assert not any("evidence_text" in n or "text" in n for n in graph["nodes"]
                   if n["kind"] == "operation")


def test_graph_evidence_text_is_cut_and_links_to_the_whole_observation(api, ns, commit_pending):
    from memory.selectors.shapes import GRAPH_TEXT_CHARS

    text = "A long note about the blob. " * 400  # 11,200 characters
    first = post(api, base(ns) + "observations/", {
        "text": text, "facts": [{"key": "blob", "value": f"value {i}"} for i in range(40)]}).json()
    commit_pending()
    graph = api.get(base(ns) + "cells/blob/graph/").json()
    evidence = [n for n in graph["nodes"] if n["kind"] == "evidence"]
    ops = [n for n in graph["nodes"] if n["kind"] == "operation"]
    assert len(ops) == 40 and {o["evidence"] for o in ops} == {first["id"]}
    assert len(evidence) == 1  # one node for the observation, not one copy per operation
    node = evidence[0]
    assert node["text"] == text[:GRAPH_TEXT_CHARS]
    assert (node["text_truncated"], node["text_chars"]) == (True, len(text))
    assert node["observation_url"].endswith(f"/api/v1/namespaces/{ns.name}/observations/{first['id']}/")
    whole = api.get(node["observation_url"])
    assert whole.status_code == 200 and whole.json()["text"] == text
