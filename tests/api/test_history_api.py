"""CONTRACT "Long histories and time travel" through the HTTP API: bounded cells, history pages,
graph windows, as_of everywhere, and bad input answered 400 naming the parameter."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import quote

import pytest

from bench.history_seed import seed_key
from memory.models import Operation, Version
from memory.services import operation_apply

pytestmark = pytest.mark.django_db


def base(ns) -> str:
    return f"/api/v1/namespaces/{ns.name}"


def op(ns, key, kind, value=None, version=None):
    return operation_apply(namespace=ns, key=key, op=kind, value=value, version_id=version,
                           actor="user:test", explicit=True)


def iso(moment) -> str:
    return quote(moment.isoformat())


def last_commit(ns):
    return Operation.objects.filter(namespace=ns).latest("id").created_at


def test_a_cell_carries_a_page_of_history_with_its_total_and_next_cursor(api, ns):
    seed_key(ns, "robot", 120)
    body = api.get(f"{base(ns)}/cells/robot/").json()
    assert len(body["history"]) == 50 and body["history_total"] == 120
    assert body["history"][0]["status"] == "active"  # the head is listed
    page = api.get(f"{base(ns)}/cells/robot/history/?before={body['history_next']}").json()
    assert page["results"][0]["value"] == "position 70" and page["total"] == 120
    small = api.get(f"{base(ns)}/cells/robot/?history=3").json()
    assert [h["value"] for h in small["history"]] == ["position 120", "position 119",
                                                      "position 118"]
    assert api.get(f"{base(ns)}/cells/robot/?history=0").json()["history"] == []


def test_history_pages_cover_the_history_once_newest_first(api, ns):
    seed_key(ns, "robot", 230)
    seen, url = [], f"{base(ns)}/cells/robot/history/?limit=100"
    while url:
        body = api.get(url).json()
        seen += [r["ordinal"] for r in body["results"]]
        url = body["next_url"]
        assert (body["next"] is None) == (url is None)
    assert seen == list(range(230, 0, -1))


def test_history_search_pages_through_matches(api, ns):
    for value in ("Lisbon", "Berlin", "Lisbon airport", "Porto", "lisbon"):
        op(ns, "city", "accept", value)
    body = api.get(f"{base(ns)}/cells/city/history/?search=LISB&limit=2").json()
    assert [r["value"] for r in body["results"]] == ["lisbon", "Lisbon airport"]
    assert body["total"] == 3
    assert "total_capped" not in body  # said only when the count stopped at its cap
    rest = api.get(f"{base(ns)}/cells/city/history/?search=LISB&limit=2"
                   f"&before={body['next']}").json()
    assert [r["value"] for r in rest["results"]] == ["Lisbon"] and rest["next"] is None


def test_a_search_counted_up_to_its_cap_says_so(api, ns, monkeypatch):
    from memory.api import cell_views
    from memory.selectors import history

    for value in ("Lisbon", "Lisbon airport", "lisbon"):
        op(ns, "city", "accept", value)
    for module in (history, cell_views):
        monkeypatch.setattr(module, "SEARCH_COUNT_CAP", 2)
    body = api.get(f"{base(ns)}/cells/city/history/?search=LISB").json()
    assert body["total"] == 2 and body["total_capped"] is True


def test_the_graph_is_a_window_with_counts_of_what_lies_outside(api, ns):
    cell = seed_key(ns, "robot", 300)
    body = api.get(f"{base(ns)}/cells/robot/graph/").json()
    versions = [n for n in body["nodes"] if n["kind"] == "version"]
    assert len(versions) == 40 and body["window"] == {
        "versions": 40, "older": 260, "newer": 0, "first": 261, "last": 300, "total": 300,
        "around": cell.head_id}
    assert {n["kind"] for n in body["nodes"]} == {"version", "evidence", "operation"}
    v100 = Version.objects.get(cell=cell, ordinal=100)
    body = api.get(f"{base(ns)}/cells/robot/graph/?around={v100.id}&limit=11").json()
    assert body["window"]["older"] == 94 and body["window"]["newer"] == 195
    shown = sorted(n["ordinal"] for n in body["nodes"] if n["kind"] == "version")
    assert shown == [*range(95, 106), 300]  # and the head, outside the window


def test_as_of_reads_the_cell_history_and_graph_as_they_were(api, ns):
    op(ns, "city", "accept", "Rome")
    rome = last_commit(ns)
    op(ns, "city", "accept", "Lisbon")
    op(ns, "city", "contest", "Porto")
    contested = last_commit(ns)
    op(ns, "city", "revoke")
    body = api.get(f"{base(ns)}/cells/city/?as_of={iso(rome)}").json()
    assert (body["value"], body["status"], body["history_total"]) == ("Rome", "active", 1)
    body = api.get(f"{base(ns)}/cells/city/?as_of={iso(contested)}").json()
    assert (body["value"], body["status"]) == ("Lisbon", "contested")
    assert [a["value"] for a in body["alternatives"]] == ["Porto"]
    assert [(h["value"], h["status"]) for h in body["history"]] == [
        ("Porto", "alternative"), ("Lisbon", "contested"), ("Rome", "superseded")]
    now = api.get(f"{base(ns)}/cells/city/").json()
    assert (now["value"], now["status"]) == ("Rome", "contested")  # the contest stays open
    history = api.get(f"{base(ns)}/cells/city/history/?as_of={iso(rome)}").json()
    assert [r["value"] for r in history["results"]] == ["Rome"] and history["total"] == 1
    graph = api.get(f"{base(ns)}/cells/city/graph/?as_of={iso(rome)}").json()
    assert [n["label"] for n in graph["nodes"] if n["kind"] == "version"] == ["Rome"]
    assert not [n for n in graph["nodes"] if n["kind"] == "tombstone"]


def test_the_frontier_and_reads_as_of_a_past_time(api, ns, commit_pending):
    api.post(f"{base(ns)}/observations/", {"facts": [{"key": "city", "value": "Rome"}]},
             format="json")
    commit_pending()
    rome = last_commit(ns)
    api.post(f"{base(ns)}/observations/", {"facts": [{"key": "city", "value": "Lisbon"},
                                                    {"key": "pet", "value": "cat"}]},
             format="json")
    commit_pending()
    body = api.get(f"{base(ns)}/cells/?as_of={iso(rome)}").json()
    assert [(r["key"], r["value"]) for r in body["results"]] == [("city", "Rome")]
    read = api.post(f"{base(ns)}/read/", {"query": "city", "as_of": rome.isoformat()},
                    format="json").json()
    assert "city = Rome" in read["context"] and "Lisbon" not in read["context"]
    raw = api.post(f"{base(ns)}/read/", {"query": "city", "mode": "raw",
                                         "as_of": rome.isoformat()}, format="json").json()
    assert len(raw["items"]) == 1


def test_as_of_before_the_namespace_is_the_empty_memory(api, ns):
    op(ns, "city", "accept", "Rome")
    before = ns.created_at - timedelta(days=1)
    assert api.get(f"{base(ns)}/cells/?as_of={iso(before)}").json()["results"] == []
    cell = api.get(f"{base(ns)}/cells/city/?as_of={iso(before)}")
    assert cell.status_code == 200
    assert (cell.json()["value"], cell.json()["status"], cell.json()["history_total"]) == (
        None, "empty", 0)
    read = api.post(f"{base(ns)}/read/", {"query": "city", "as_of": before.isoformat()},
                    format="json").json()
    assert read["items"] == []


def test_an_erased_key_has_no_past(api, ns):
    op(ns, "secret", "accept", "hunter2")
    then = last_commit(ns)
    assert api.delete(f"{base(ns)}/cells/secret/").status_code == 204
    assert api.get(f"{base(ns)}/cells/secret/?as_of={iso(then)}").status_code == 404
    assert api.get(f"{base(ns)}/cells/secret/history/?as_of={iso(then)}").status_code == 404
    body = api.get(f"{base(ns)}/cells/?as_of={iso(then)}").json()
    assert body["results"] == []


def test_an_operation_answers_the_bounded_cell(api, ns):
    seed_key(ns, "robot", 200)
    body = api.post(f"{base(ns)}/cells/robot/operations/", {"op": "revoke"},
                    format="json").json()
    assert body["cell"]["value"] == "position 199"
    assert len(body["cell"]["history"]) == 50 and body["cell"]["history_total"] == 200


@pytest.mark.parametrize(("path", "field"), [
    ("cells/k/?as_of=2026-01-01T10:00:00", "as_of"),  # no zone
    ("cells/k/?as_of=yesterday", "as_of"),
    ("cells/k/?as_of=2026-13-01T10:00:00Z", "as_of"),
    ("cells/?as_of=2026-01-01", "as_of"),
    ("cells/k/history/?as_of=2026-01-01T10:00", "as_of"),
    ("cells/k/graph/?as_of=10:00Z", "as_of"),
    ("cells/k/?history=1001", "history"),
    ("cells/k/?history=-1", "history"),
    ("cells/k/history/?limit=1001", "limit"),
    ("cells/k/history/?limit=0", "limit"),
    ("cells/k/history/?before=abc", "before"),
    ("cells/k/history/?search=%21%21%21", "search"),
    ("cells/k/graph/?limit=501", "limit"),
    ("cells/k/graph/?around=x", "around"),
    ("cells/k/timeline/?buckets=501", "buckets"),
])
def test_bad_parameters_are_400_naming_the_parameter(api, ns, path, field):
    op(ns, "k", "accept", "v")
    response = api.get(f"{base(ns)}/{path}")
    assert response.status_code == 400, response.content
    assert response.json()["field"] == field


def test_a_cursor_or_version_of_another_key_is_400_naming_it(api, ns):
    op(ns, "k", "accept", "v1")
    op(ns, "k", "accept", "v2")
    other = op(ns, "other", "accept", "x")
    other_cell = other.cell
    cursor = f"{other_cell.pk}-2"
    response = api.get(f"{base(ns)}/cells/k/history/?before={cursor}")
    assert response.status_code == 400 and response.json()["field"] == "before"
    response = api.get(f"{base(ns)}/cells/k/graph/?around={other.operation.version_id}")
    assert response.status_code == 400 and response.json()["field"] == "around"
    response = api.post(f"{base(ns)}/read/", {"query": "k", "as_of": "2026-01-01T10:00:00"},
                        format="json")
    assert response.status_code == 400 and response.json()["field"] == "as_of"


def test_a_zone_offset_whose_plus_became_a_space_is_understood(api, ns):
    op(ns, "k", "accept", "v")
    shifted = (last_commit(ns) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.%f")
    ok = api.get(f"{base(ns)}/cells/k/?as_of={shifted} 01:00")
    assert ok.status_code == 200 and ok.json()["value"] == "v"
