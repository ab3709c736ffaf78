"""The cell page at scale and in the past, without a browser: bounded statements and bytes
whatever the history's length, bad parameters answered 400 naming them, time travel's
answers, the retract form's search, the log's links into the past."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from memory.models import Cell, Operation, Version
from memory.selectors.timeline import op_steps, resolve_jump
from memory.services import observation_ingest, operation_apply

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _grow(ns: Any, key: str, n: int, per: int = 50) -> Cell:
    """``key`` written ``n`` times, ``per`` facts an observation."""
    done = 0
    while done < n:
        k = min(per, n - done)
        observation_ingest(namespace=ns, source="bench", actor="api:robot", text=f"at {done}",
                           facts=[{"key": key, "value": f"p{done + i}"} for i in range(k)])
        done += k
    return Cell.objects.get(namespace=ns, key=key)


def _statements(client: Client, url: str, **extra: Any) -> tuple[int, int]:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url, **extra)
    assert response.status_code == 200, response.content[:300]
    return len(ctx.captured_queries), len(response.content)


def _urls(ns: str, key: str, cell: Cell) -> list[tuple[str, dict[str, str]]]:
    mid = Version.objects.get(cell=cell, ordinal=cell.version_count // 2).pk
    base = f"/ns/{ns}/cells/{key}/"
    return [(base, {}), (base + "graph/", {}), (base + f"graph/?around={mid}", {}),
            (base + f"graph/?around={mid}&side=older", {}), (base + "timeline/", {}),
            (base + "history/", HTMX), (base + f"versions/{mid}/", {}),
            (base + "versions/?vq=p1", {})]


def test_cell_page_reads_cost_the_same_at_20_and_600_versions(
        demo_ns: Any, make_user: Any) -> None:
    client = client_for(make_user("reviewer", demo_ns))
    small = _grow(demo_ns, "short_key", 20, per=20)
    large = _grow(demo_ns, "long_key", 600)
    for (url_s, extra_s), (url_l, extra_l) in zip(_urls(demo_ns.name, "short_key", small),
                                                   _urls(demo_ns.name, "long_key", large),
                                                   strict=True):
        q_small, bytes_small = _statements(client, url_s, **extra_s)
        q_large, bytes_large = _statements(client, url_l, **extra_l)
        assert q_large == q_small, (url_l, q_small, q_large)
        # A window of 40 versions, a page of 50: never the whole history.
        assert bytes_large < 120_000, (url_l, bytes_large)


def test_the_graph_window_has_40_versions_and_counts_the_rest(demo_ns: Any,
                                                              make_user: Any) -> None:
    client = client_for(make_user("viewer", demo_ns))
    cell = _grow(demo_ns, "long_key", 130)
    graph = client.get(f"/ns/{demo_ns.name}/cells/long_key/graph/").json()
    versions = [n for n in graph["nodes"] if n["kind"] == "version"]
    window = {k: graph["window"][k] for k in ("versions", "older", "newer")}
    assert len(versions) == 40 and window == {"versions": 40, "older": 90, "newer": 0}
    assert {n["ordinal"] for n in versions} == set(range(91, 131))
    oldest = min(n["version"] for n in versions)
    older = client.get(f"/ns/{demo_ns.name}/cells/long_key/graph/?around={oldest}&side=older"
                       ).json()
    got = sorted(n["ordinal"] for n in older["nodes"] if n["kind"] == "version" and n["in_window"])
    assert got == list(range(51, 91)) and older["window"]["older"] == 50
    # The head is drawn with every window (and every open alternative would be).
    assert any(n["ordinal"] == 130 for n in older["nodes"] if n["kind"] == "version")
    # Every operation and observation of the versions shown, each linked into the past.
    ops = [n for n in graph["nodes"] if n["kind"] == "operation"]
    assert ops and all(n["asof_before"] and n["asof_after"] for n in ops)
    assert all(f"v{d['target'][1:]}" == d["target"] for d in graph["derived"])
    assert cell.version_count == 130


@pytest.mark.parametrize(("query", "name"), [
    ("as_of=yesterday", "as_of"), ("as_of=2026-11-30T10:00:00", "as_of"),
    ("limit=501", "limit"), ("limit=-1", "limit"), ("around=x", "around"),
    ("side=up", "side"), ("jump=v999", "jump"),
])
def test_bad_graph_parameters_are_400_naming_them(query: str, name: str, demo_ns: Any,
                                                  make_user: Any) -> None:
    client = client_for(make_user("viewer", demo_ns))
    response = client.get(f"/ns/{demo_ns.name}/cells/alice_home_city/graph/?{query}")
    assert response.status_code == 400
    assert response.json()["parameter"] == name


def test_bad_page_parameters_are_400_naming_them(demo_ns: Any, make_user: Any) -> None:
    client = client_for(make_user("viewer", demo_ns))
    for path in (f"/ns/{demo_ns.name}/cells/alice_home_city/?as_of=2026-11-30T10:00:00",
                 f"/ns/{demo_ns.name}/?as_of=not-a-date",
                 f"/ns/{demo_ns.name}/cells/alice_home_city/?before=1-2"):
        response = client.get(path)
        assert response.status_code == 400, path
        assert b"as_of" in response.content or b"before" in response.content
    other = Cell.objects.get(namespace=demo_ns, key="mug_1_location")
    around = Version.objects.filter(cell=other).first().pk
    response = client.get(f"/ns/{demo_ns.name}/cells/alice_home_city/graph/?around={around}")
    assert response.status_code == 400 and response.json()["parameter"] == "around"


def test_as_of_before_the_namespace_is_the_empty_memory(demo_ns: Any, make_user: Any) -> None:
    client = client_for(make_user("reviewer", demo_ns))
    body = client.get(f"/ns/{demo_ns.name}/cells/alice_home_city/?as_of=2001-01-01T00:00:00Z"
                      ).content.decode()
    assert "Looking at the past" in body and "— empty —" in body
    assert 'id="cell-actions"' not in body and "/operations/" not in body.split("<main")[1]
    body = client.get(f"/ns/{demo_ns.name}/?as_of=2001-01-01T00:00:00%2B02:00").content.decode()
    assert "Memory was empty then" in body


def test_the_cell_as_of_each_operation_replays_the_log(demo_ns: Any, make_user: Any) -> None:
    """Stepping through mug_1_location's operations shows, after each, the value the log's
    replay gives: countertop 1, cabinet 3, countertop 1 (the retraction reinstates)."""
    client = client_for(make_user("viewer", demo_ns))
    cell = Cell.objects.get(namespace=demo_ns, key="mug_1_location")
    steps = op_steps(cell=cell, as_of=None)
    seen = []
    url = None
    while steps.back is not None and len(seen) < 10:
        url = f"/ns/{demo_ns.name}/cells/mug_1_location/?as_of={steps.back.isoformat()}"
        body = client.get(url.replace("+", "%2B")).content.decode()
        seen.append(body.split('data-testid="current-value">')[1].split("<")[0])
        steps = op_steps(cell=cell, as_of=steps.back)
    # Newest first: before the revoke it was cabinet 3; before the move, countertop 1; before
    # the first observation, nothing.
    assert seen[0] == "cabinet 3" and seen[1] == "countertop 1" and seen[-1] == ""


def test_jump_names_a_version_an_id_or_a_date(demo_ns: Any) -> None:
    cell = Cell.objects.get(namespace=demo_ns, key="laptop_1_location")
    first = Version.objects.get(cell=cell, ordinal=1)
    assert resolve_jump(cell=cell, text="v1") == first.pk
    assert resolve_jump(cell=cell, text="1") == first.pk
    assert resolve_jump(cell=cell, text=f"id {first.pk}") == first.pk
    assert resolve_jump(cell=cell, text="2001-01-01") == first.pk  # before all: the oldest
    newest = Version.objects.filter(cell=cell).order_by("-ordinal").first()
    assert resolve_jump(cell=cell, text="2999-01-01 00:00") == newest.pk


def test_the_retract_form_finds_versions_by_search(demo_ns: Any, make_user: Any) -> None:
    cell = _grow(demo_ns, "long_key", 120)
    reviewer = client_for(make_user("reviewer", demo_ns))
    url = f"/ns/{demo_ns.name}/cells/long_key/versions/"
    body = reviewer.get(url, {"vq": "p7"}).content.decode()
    assert "p7<" in body.replace(" ", "") or ": p7 " in body
    v3 = Version.objects.get(cell=cell, ordinal=3)
    body = reviewer.get(url, {"vq": "v3"}).content.decode()
    assert f'value="{v3.pk}"' in body and body.count('type="radio"') == 1
    page = reviewer.get(f"/ns/{demo_ns.name}/cells/long_key/").content.decode()
    assert page.count('name="version"') <= 12 + 0  # never a select of the whole history
    viewer = client_for(make_user("viewer", demo_ns))
    assert viewer.get(url, {"vq": "p"}).status_code == 403
    # A version outside the first window can be retracted.
    response = reviewer.post(f"/ns/{demo_ns.name}/cells/long_key/operations/",
                             {"op": "revoke", "version": v3.pk, "reason": "bad reading"})
    assert response.status_code == 302
    v3.refresh_from_db()
    assert v3.status == "revoked"


def test_the_log_links_each_operation_to_memory_before_and_after(demo_ns: Any,
                                                                  make_user: Any) -> None:
    client = client_for(make_user("viewer", demo_ns))
    body = client.get(f"/ns/{demo_ns.name}/operations/").content.decode()
    op = Operation.objects.filter(namespace=demo_ns).order_by("-id").first()
    assert f"/ns/{demo_ns.name}/cells/{op.key}/?as_of=" in body
    assert body.count('data-testid="asof-before"') >= 10


def test_a_past_page_of_a_cell_has_no_action_and_no_form(demo_ns: Any, make_user: Any) -> None:
    operation_apply(namespace=demo_ns, key="alice_home_city", op="accept", value="Oslo",
                    actor="user:x", reason="moved", explicit=True)
    op = Operation.objects.filter(namespace=demo_ns, key="alice_home_city").order_by("-id")[0]
    client = client_for(make_user("reviewer", demo_ns))
    as_of = op.created_at.isoformat().replace("+", "%2B")
    body = client.get(f"/ns/{demo_ns.name}/cells/alice_home_city/?as_of={as_of}").content.decode()
    assert "Oslo" in body and "Looking at the past" in body and "cell-actions" not in body
    panel = client.get(f"/ns/{demo_ns.name}/cells/alice_home_city/panel/?as_of={as_of}")
    assert b"cell-actions" not in panel.content


def test_the_present_timeline_counts_what_the_aggregate_counts(demo_ns: Any) -> None:
    """The timeline drawn from the ordinals at the bucket edges and the few versions that are
    not superseded agrees, bucket by bucket and status by status, with the selectors'
    aggregate over every version."""
    from explorer.pages.cell_graph import timeline_json
    from memory.selectors.timeline import status_timeline

    cell = _grow(demo_ns, "long_key", 150, per=10)
    middle = Version.objects.get(cell=cell, ordinal=70)
    operation_apply(namespace=demo_ns, key="long_key", op="revoke", version_id=middle.pk,
                    actor="user:x", reason="bad", explicit=True)
    operation_apply(namespace=demo_ns, key="long_key", op="contest", value="elsewhere",
                    actor="user:x", reason="doubt", explicit=True)
    operation_apply(namespace=demo_ns, key="long_key", op="reject", actor="user:x",
                    reason="wrong", explicit=True)
    for key in ("long_key", "mug_1_location", "team_meeting_day"):
        cell = Cell.objects.get(namespace=demo_ns, key=key)
        fast = timeline_json(cell, buckets=12, as_of=None)
        slow = status_timeline(cell, buckets=12)
        by = {b["bucket"]: b["counts"] for b in slow["bins"]}
        assert fast["versions"] == slow["total"]
        for i, bucket in enumerate(fast["buckets"], start=1):
            assert {k: v for k, v in bucket["counts"].items() if v} == by.get(i, {}), (key, i)


def test_the_frontier_as_of_shows_values_then_and_searches_them(demo_ns: Any,
                                                                make_user: Any) -> None:
    client = client_for(make_user("viewer", demo_ns))
    revoke = Operation.objects.get(namespace=demo_ns, key="mug_1_location", type="revoke")
    before = (revoke.created_at - __import__("datetime").timedelta(microseconds=1)).isoformat()
    url = f"/ns/{demo_ns.name}/"
    body = client.get(url, {"as_of": before}).content.decode()
    assert "Looking at the past" in body and "cabinet 3" in body
    assert f"/ns/{demo_ns.name}/cells/mug_1_location/?as_of=" in body
    body = client.get(url, {"as_of": before, "q": "mug"}).content.decode()
    assert "mug_1_location" in body and "alice_home_city" not in body
    now = client.get(url, {"q": "mug"}).content.decode()
    assert "Looking at the past" not in now


def test_a_phones_timeline_asks_for_fewer_buckets_and_a_bad_count_is_refused(
        demo_ns: Any, make_user: Any) -> None:
    """The timeline answers ``buckets`` from 4 to 60 (a phone asks for as many as fit a finger
    wide); anything else is a 400 naming the parameter, never a 500."""
    client = client_for(make_user("viewer", demo_ns))
    _grow(demo_ns, "long_key", 30, per=10)
    base = f"/ns/{demo_ns.name}/cells/long_key/timeline/"
    eight = client.get(base + "?buckets=8").json()
    assert len(eight["buckets"]) == 8 and eight["versions"] == 30
    assert sum(b["total"] for b in eight["buckets"]) == 30
    assert len(client.get(base).json()["buckets"]) == 60
    for bad in ("3", "61", "x", "-5", ""):
        response = client.get(base + f"?buckets={bad}")
        if bad == "":
            assert response.status_code == 200
            continue
        assert response.status_code == 400, bad
        assert b"buckets" in response.content
