"""The reviewer's workbench through Django's test client on PostgreSQL: undo,
restore, the review queue, the readable log with filters and position, diff, exports."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory.models import Operation, Version
from memory.services import observation_ingest, operation_apply

pytestmark = pytest.mark.django_db


@pytest.fixture
def reviewer(client, ns, make_user):
    user = make_user("reviewer", ns)
    client.force_login(user)
    return user


def op(ns, key, kind, value=None, version=None, actor="api:planner"):
    return operation_apply(namespace=ns, key=key, op=kind, value=value, version_id=version,
                           actor=actor, explicit=True, reason="r").operation


def post_op(client, ns, key, **data):
    return client.post(f"/ns/{ns.name}/cells/{key}/operations/", data, HTTP_HX_REQUEST="true")


def test_a_retraction_offers_undo_and_undo_restores_it(client, ns, reviewer):
    op(ns, "city", "accept", "Paris")
    op(ns, "city", "accept", "Tokyo")
    r = post_op(client, ns, "city", op="revoke", reason="reported in error")
    html = r.content.decode()
    assert "Current value: Paris" in html and "Undo: restore the retracted version" in html
    revoke = Operation.objects.filter(namespace=ns, type="revoke").get()
    r = client.post(f"/ns/{ns.name}/operations/{revoke.pk}/undo/",
                    {"reason": f"undo of operation {revoke.pk}"}, HTTP_HX_REQUEST="true")
    html = r.content.decode()
    assert r.status_code == 200 and "Undone" in html and "Tokyo" in html
    restore = Operation.objects.filter(namespace=ns, type="restore").get()
    assert restore.actor == f"user:{reviewer.username}" and restore.payload["undoes"] == revoke.pk
    # the restore itself offers its own undo (retract the restored value)
    assert "Undo: retract the restored value" in html


def test_revoked_and_contradicted_versions_have_restore(client, ns, reviewer):
    op(ns, "city", "accept", "Paris")
    op(ns, "city", "reject", "Lyon")
    op(ns, "city", "accept", "Nice")
    op(ns, "city", "revoke")
    page = client.get(f"/ns/{ns.name}/cells/city/").content.decode()
    paris = Version.objects.get(cell__namespace=ns, value="Paris")
    nice = Version.objects.get(cell__namespace=ns, value="Nice")
    assert f'data-testid="restore-{paris.pk}"' in page and f'data-testid="restore-{nice.pk}"' in page
    r = post_op(client, ns, "city", op="restore", version=paris.pk, reason="Paris was right")
    assert "Current value: Paris" in r.content.decode()
    new = Version.objects.get(cell__namespace=ns, value="Paris", status="active")
    assert new.restores_id == paris.pk


def test_a_refused_action_keeps_the_reason_and_says_what_changed(client, ns, reviewer):
    op(ns, "team", "accept", "Mon")
    op(ns, "team", "contest", "Tue")
    page = client.get(f"/ns/{ns.name}/cells/team/").content.decode()
    seen = Operation.objects.filter(namespace=ns).order_by("-id").first().pk
    assert f'"seen": "{seen}"' in page
    op(ns, "team", "accept", "Wed", actor="api:crm")  # a later write closes the contest
    tue = Version.objects.get(cell__namespace=ns, value="Tue")
    r = post_op(client, ns, "team", op="resolve", version=tue.pk, reason="Tue per calendar",
                seen=seen)
    html = r.content.decode()
    assert "Refused: invalid: resolve needs a contested cell" in html
    assert "What changed since you opened this page" in html and "api:crm" in html
    assert "Tue per calendar" in html  # what the reviewer typed is kept


def test_the_review_queue_shows_competing_values_and_resolves_many(client, ns, reviewer):
    for key in ("a", "b", "c"):
        op(ns, key, "accept", f"{key}-1")
        op(ns, key, "contest", f"{key}-2")
    page = client.get(f"/ns/{ns.name}/review/").content.decode()
    for value in ("a-1", "a-2", "b-1", "b-2", "c-1", "c-2"):
        assert value in page
    keys = {}
    for i, key in enumerate(("a", "b", "c"), start=1):
        keys[key] = i
    a2 = Version.objects.get(cell__namespace=ns, value="a-2").pk
    b1 = Version.objects.get(cell__namespace=ns, value="b-1").pk
    order = [c for c in ("a", "b", "c")]
    data = {"pick": ["1", "2"]}
    for i, key in enumerate(order, start=1):
        data[f"key-{i}"] = key
    data.update({"winner-1": str(a2), "reason-1": "a2 confirmed", "winner-2": str(b1),
                 "reason-2": ""})
    r = client.post(f"/ns/{ns.name}/review/", data)
    html = r.content.decode()
    assert "Resolved" in html and "Say why" in html  # b had no reason: refused, a resolved
    assert Operation.objects.filter(namespace=ns, type="resolve").count() == 1
    assert Version.objects.get(pk=a2).status == "active"


def test_the_queue_sorts_and_counts(client, ns, reviewer):
    for key in ("b_key", "a_key", "c_key"):
        op(ns, key, "accept", "x")
        op(ns, key, "contest", "y")
    page = client.get(f"/ns/{ns.name}/review/?sort=key").content.decode()
    assert page.index(">a_key<") < page.index(">b_key<") < page.index(">c_key<")
    page = client.get(f"/ns/{ns.name}/review/?sort=newest").content.decode()
    assert page.index(">c_key<") < page.index(">a_key<") < page.index(">b_key<")
    assert 'data-testid="queue-count">(3)' in page


def test_diff_marks_the_words_that_differ(client, ns, reviewer):
    op(ns, "meeting", "accept", "Tuesday at 10")
    op(ns, "meeting", "accept", "Thursday at 10")
    page = client.get(f"/ns/{ns.name}/cells/meeting/diff/").content.decode()
    assert "<del>Tuesday</del>" in page and "<ins>Thursday</ins>" in page


def test_the_queue_lists_contests_later_writes_closed_since_the_last_look(client, ns, reviewer):
    op(ns, "k", "accept", "x")
    op(ns, "k", "contest", "y")
    client.get(f"/ns/{ns.name}/review/")  # the reviewer looks
    op(ns, "k", "accept", "z", actor="api:crm")
    page = client.get(f"/ns/{ns.name}/review/").content.decode()
    assert "since you last looked" in page and "api:crm" in page and "“z”" in page
    page = client.get(f"/ns/{ns.name}/review/").content.decode()
    assert 'data-testid="closed-none"' in page  # seen now


def test_the_log_shows_values_plain_reasons_evidence_links_and_its_position(client, ns, reviewer):
    observation_ingest(namespace=ns, text="city = Paris", source="crm-sync", actor="api:crm")
    for i in range(60):
        op(ns, "other", "accept", f"v{i}")
    op(ns, "city", "revoke")
    page = client.get(f"/ns/{ns.name}/operations/?key_contains=city").content.decode()
    assert "Operations 1–2 of 2" in page  # the accept and the revoke (no predecessor)
    assert "the observation states it" in page  # not "rule: asserted"
    assert "decided by the rule extractor" in page and "api:crm" in page
    assert "crm-sync" in page and "observation #1" in page and "Paris" in page
    page = client.get(f"/ns/{ns.name}/operations/").content.decode()
    assert "Operations 1–50 of 62" in page
    older = Operation.objects.filter(namespace=ns).order_by("-id")[49].pk
    page = client.get(f"/ns/{ns.name}/operations/?before={older}").content.decode()
    assert "Operations 51–62 of 62" in page and "Newest" in page
    page = client.get(f"/ns/{ns.name}/operations/?source=crm-sync&op=accept").content.decode()
    assert "Operations 1–1 of 1" in page
    page = client.get(f"/ns/{ns.name}/operations/?actor=api:crm").content.decode()
    assert "Operations 1–1 of 1" in page


def test_an_observation_with_no_fact_says_so(client, ns, reviewer):
    e = observation_ingest(namespace=ns, text="Dave told me his new manager is Zed.",
                           actor="user:x")
    page = client.get(f"/ns/{ns.name}/observations/{e.pk}/").content.decode()
    assert "No fact found: the rule extractor" in page
    log = client.get(f"/ns/{ns.name}/operations/").content.decode()
    assert "Observations that yielded no fact" in log and "Dave told me" in log


def test_diff_shows_two_versions_side_by_side(client, ns, reviewer):
    observation_ingest(namespace=ns, text="city = Paris", source="crm-sync", actor="api:crm")
    op(ns, "city", "accept", "Tokyo")
    paris = Version.objects.get(cell__namespace=ns, value="Paris").pk
    tokyo = Version.objects.get(cell__namespace=ns, value="Tokyo").pk
    page = client.get(f"/ns/{ns.name}/cells/city/diff/").content.decode()
    sides = page.split('data-testid="diff"')[1]
    assert sides.index("Paris") < sides.index("Tokyo") and "crm-sync" in sides
    r = client.get(f"/ns/{ns.name}/cells/city/diff/?a={tokyo}&b=999999")
    assert r.status_code == 404
    r = client.get(f"/ns/{ns.name}/cells/city/diff/?a={paris}&b={tokyo}")
    assert r.status_code == 200 and "api:planner" in r.content.decode()


def _body(response) -> str:
    return b"".join(response.streaming_content).decode()


def test_exports_are_streamed_csv_and_json(client, ns, reviewer):
    op(ns, "city", "accept", "Paris, \"France\"")
    op(ns, "city", "accept", "Tokyo")
    r = client.get(f"/ns/{ns.name}/cells/city/export.csv")
    assert r.streaming and r["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(_body(r))))
    assert rows[0][:3] == ["version", "value", "status"]
    assert [r[1:3] for r in rows[1:]] == [["Tokyo", "active"], ['Paris, "France"', "superseded"]]
    r = client.get(f"/ns/{ns.name}/export/frontier.json")
    assert json.loads(_body(r)) [0]["value"] == "Tokyo"
    r = client.get(f"/ns/{ns.name}/operations/export.json?op=accept")
    log = json.loads(_body(r))
    assert [o["value"] for o in log] == ["Tokyo", 'Paris, "France"']
    assert {o["actor"] for o in log} == {"api:planner"}
    assert client.get(f"/ns/{ns.name}/export/frontier.xml").status_code == 404


def test_a_log_export_of_100000_rows_streams_in_a_bounded_number_of_queries(client, ns, reviewer):
    with connection.cursor() as cur:
        cur.execute(
            "INSERT INTO memory_operation (namespace_id, key, type, requested, actor, value,"
            " payload, reason, raw_output, prompt_tokens, completion_tokens, created_at,"
            " method, source) SELECT %s, 'k' || (i %% 100), 'accept', 'accept', 'api:bulk',"
            " 'value ' || i, '{}', '', '', 0, 0, now(), 'rule', 'bulk'"
            " FROM generate_series(1, 100000) AS i", [ns.pk])
    r = client.get(f"/ns/{ns.name}/operations/export.csv")
    with CaptureQueriesContext(connection) as queries:
        lines = sum(chunk.count(b"\n") for chunk in r.streaming_content)
    assert lines == 100_001
    assert len(queries) <= 5, [q["sql"][:80] for q in queries]


def test_an_observation_added_in_the_explorer_is_signed_by_the_reviewer(client, ns, reviewer):
    from memory.models import Evidence
    from memory.services import namespace_drain, observation_extract

    client.post(f"/ns/{ns.name}/observations/", {"text": "city = Rome", "source": "phone call"})
    evidence = Evidence.objects.get(namespace=ns)
    observation_extract(evidence_id=evidence.pk)
    namespace_drain(namespace_id=ns.pk)
    [operation] = Operation.objects.filter(namespace=ns)
    assert (operation.actor, operation.method, operation.source) == (
        f"user:{reviewer.username}", "rule", "phone call")
    page = client.get(f"/ns/{ns.name}/operations/?actor=user:{reviewer.username}").content.decode()
    assert "phone call" in page and "decided by the rule extractor" in page


def test_a_viewer_sees_the_queue_without_forms_and_may_not_resolve_or_undo(client, ns, make_user):
    op(ns, "k", "accept", "x")
    contest = op(ns, "k", "contest", "y")
    client.force_login(make_user("viewer", ns))
    page = client.get(f"/ns/{ns.name}/review/").content.decode()
    assert "y" in page and 'method="post"' not in page.split('id="main"')[1]
    y = Version.objects.get(cell__namespace=ns, value="y").pk
    r = client.post(f"/ns/{ns.name}/review/", {"only": "1", "key-1": "k", "winner-1": y,
                                               "reason-1": "forged"})
    assert r.status_code == 403
    assert client.post(f"/ns/{ns.name}/operations/{contest.pk}/undo/").status_code == 403
    assert client.get(f"/ns/{ns.name}/cells/k/panel/?part=restore").status_code == 403
    assert Operation.objects.filter(namespace=ns, type="resolve").count() == 0


def test_an_outsider_gets_404_for_every_workbench_page(client, ns, make_user):
    op(ns, "k", "accept", "x")
    client.force_login(make_user(None))
    for path in ("review/", "cells/k/diff/", "cells/k/export.csv", "export/frontier.json",
                 "operations/export.csv"):
        assert client.get(f"/ns/{ns.name}/{path}").status_code == 404, path


@pytest.mark.parametrize("winner", ["²", "99999999999999999999999", "-1", "abc", ""])
def test_hostile_queue_input_is_refused_in_words_not_a_500(client, ns, reviewer, winner):
    op(ns, "k", "accept", "x")
    op(ns, "k", "contest", "y")
    r = client.post(f"/ns/{ns.name}/review/", {"only": "1", "key-1": "k", "winner-1": winner,
                                               "reason-1": "r"})
    assert r.status_code in (200, 409) and "Pick the winner." in r.content.decode()


def test_hostile_ids_and_filters_are_404_or_named(client, ns, reviewer):
    op(ns, "k", "accept", "x")
    assert client.post(f"/ns/{ns.name}/operations/99999999999999999999999/undo/").status_code == 404
    r = client.get(f"/ns/{ns.name}/cells/k/diff/?a=99999999999999999999&b=²")
    assert r.status_code == 200
    page = client.get(f"/ns/{ns.name}/operations/?op=delete&key_contains=k").content.decode()
    assert "Filter not applied: op" in page and "Operations 1–1 of 1" in page


def test_the_log_numbers_versions_within_their_key_with_the_global_id_on_hover(client, ns,
                                                                               reviewer):
    op(ns, "other", "accept", "x")  # global ids and per-key ordinals part ways
    op(ns, "city", "accept", "Paris")
    second = op(ns, "city", "accept", "Tokyo")
    html = client.get(f"/ns/{ns.name}/operations/?key=city").content.decode()
    assert f'#v2" title="id {second.version_id}">v2</a>' in html  # the URL names v2 too
    assert f">version {second.version_id}<" not in html
