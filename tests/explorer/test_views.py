"""Explorer rules without a browser: membership, roles, CSRF, htmx fragments, live polling."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.test import Client

from memory.models import Evidence, Membership, Operation
from memory.selectors.cells import cell_detail, cell_lookup
from memory.selectors.graph import graph_window
from memory.selectors.log import live_fingerprint
from memory.services import observation_fail, observation_record, operation_apply

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


def client_for(user: Any, **kwargs: Any) -> Client:
    client = Client(**kwargs)
    client.force_login(user)
    return client


def test_anonymous_is_sent_to_login(client: Client, demo_ns: Any) -> None:
    for path in ("/", f"/ns/{demo_ns.name}/", f"/ns/{demo_ns.name}/cells/alice_home_city/"):
        response = client.get(path)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    assert client.get("/accounts/login/").status_code == 200


def test_index_lists_only_the_users_namespaces_with_counts(demo_ns: Any, make_namespace: Any,
                                                           make_user: Any) -> None:
    other = make_namespace("hidden")
    body = client_for(make_user("viewer", demo_ns)).get("/").content.decode()
    assert demo_ns.name in body and other.name not in body
    superuser = make_user(None, superuser=True)
    body = client_for(superuser).get("/").content.decode()
    assert demo_ns.name in body and other.name in body


@pytest.mark.parametrize("path", ["/ns/{ns}/", "/ns/{ns}/cells/alice_home_city/",
                                  "/ns/{ns}/cells/alice_home_city/graph/",
                                  "/ns/{ns}/cells/alice_home_city/panel/", "/ns/{ns}/operations/",
                                  "/ns/{ns}/read/?q=x", "/ns/{ns}/live/"])
def test_a_non_member_gets_404_as_if_the_namespace_did_not_exist(
        path: str, demo_ns: Any, make_user: Any) -> None:
    client = client_for(make_user(None))
    assert client.get(path.format(ns=demo_ns.name)).status_code == 404
    assert client.get(path.format(ns="no-such-namespace")).status_code == 404


def test_a_non_member_post_gets_404_and_changes_nothing(demo_ns: Any, make_user: Any) -> None:
    client = client_for(make_user(None))
    response = client.post(f"/ns/{demo_ns.name}/cells/alice_home_city/operations/",
                           {"op": "revoke", "reason": "x"})
    assert response.status_code == 404
    assert cell_detail(namespace=demo_ns, key="alice_home_city").value == "Lisbon"


def test_a_viewer_sees_the_cell_without_actions(demo_ns: Any, make_user: Any) -> None:
    client = client_for(make_user(Membership.Role.VIEWER, demo_ns))
    body = client.get(f"/ns/{demo_ns.name}/cells/alice_home_city/").content.decode()
    assert "Lisbon" in body and 'id="cell-actions"' not in body
    assert "Correct this memory" not in body


@pytest.mark.parametrize("path,data", [
    ("/ns/{ns}/cells/alice_home_city/operations/", {"op": "revoke", "reason": "forged"}),
    ("/ns/{ns}/observations/", {"text": "alice_home_city = Oslo", "key": "alice_home_city"}),
])
def test_a_viewers_forged_post_is_refused_with_403(path: str, data: dict[str, str], demo_ns: Any,
                                                   make_user: Any) -> None:
    client = client_for(make_user(Membership.Role.VIEWER, demo_ns))
    evidence_before = Evidence.objects.filter(namespace=demo_ns).count()
    assert client.post(path.format(ns=demo_ns.name), data, **HTMX).status_code == 403
    assert cell_detail(namespace=demo_ns, key="alice_home_city").value == "Lisbon"
    assert Evidence.objects.filter(namespace=demo_ns).count() == evidence_before


def test_a_viewer_cannot_retry_a_failed_observation(demo_ns: Any, make_user: Any) -> None:
    evidence = observation_record(namespace=demo_ns, text="x = 1").evidence
    observation_fail(evidence_id=evidence.pk, error="boom")
    client = client_for(make_user(Membership.Role.VIEWER, demo_ns))
    assert client.post(f"/ns/{demo_ns.name}/observations/{evidence.pk}/retry/").status_code == 403
    evidence.refresh_from_db()
    assert evidence.state == "failed"


def test_posts_without_a_csrf_token_are_refused(demo_ns: Any, make_user: Any) -> None:
    client = client_for(make_user("reviewer", demo_ns), enforce_csrf_checks=True)
    response = client.post(f"/ns/{demo_ns.name}/cells/alice_home_city/operations/",
                           {"op": "revoke", "reason": "no token"}, **HTMX)
    assert response.status_code == 403
    assert cell_detail(namespace=demo_ns, key="alice_home_city").value == "Lisbon"


def test_pages_carry_the_csrf_token_for_htmx(demo_ns: Any, make_user: Any) -> None:
    body = client_for(make_user("reviewer", demo_ns)).get(
        f"/ns/{demo_ns.name}/cells/alice_home_city/").content.decode()
    assert 'hx-headers=\'{"X-CSRFToken": "' in body
    assert body.count("csrfmiddlewaretoken") >= 6  # every action form, and logout


def test_retract_through_htmx_returns_the_panel_and_reinstates(demo_ns: Any,
                                                               make_user: Any) -> None:
    user = make_user("reviewer", demo_ns)
    response = client_for(user).post(f"/ns/{demo_ns.name}/cells/alice_home_city/operations/",
                                     {"op": "revoke", "reason": "wrong city"}, **HTMX)
    assert response.status_code == 200
    assert "pmem-graph" in json.loads(response["HX-Trigger"])
    body = response.content.decode()
    assert body.startswith('<div id="cell-panel"') and "<html" not in body
    assert "Current value: Berlin" in body
    op = Operation.objects.filter(namespace=demo_ns, type="revoke").latest("id")
    assert (op.actor, op.reason) == (f"user:{user.username}", "wrong city")
    assert cell_detail(namespace=demo_ns, key="alice_home_city").value == "Berlin"


def test_a_plain_form_post_redirects_back_to_the_cell(demo_ns: Any, make_user: Any) -> None:
    response = client_for(make_user("reviewer", demo_ns)).post(
        f"/ns/{demo_ns.name}/cells/favorite_color/operations/",
        {"op": "accept", "value": "teal", "reason": "asked the user"})
    assert response.status_code == 302
    assert response["Location"] == f"/ns/{demo_ns.name}/cells/favorite_color/"
    assert cell_detail(namespace=demo_ns, key="favorite_color").value == "teal"


def test_an_invalid_operation_is_refused_with_its_reason_not_a_500(demo_ns: Any,
                                                                   make_user: Any) -> None:
    client = client_for(make_user("reviewer", demo_ns))
    url = f"/ns/{demo_ns.name}/cells/temp_access_code/operations/"  # an empty cell
    before = Operation.objects.filter(namespace=demo_ns).count()
    plain = client.post(url, {"op": "contest", "value": "1", "reason": "r"})
    assert plain.status_code == 409 and "Refused:" in plain.content.decode()
    fragment = client.post(url, {"op": "revoke", "reason": "r"}, **HTMX)
    assert fragment.status_code == 200 and "Refused:" in fragment.content.decode()
    assert Operation.objects.filter(namespace=demo_ns).count() == before


def test_a_missing_reason_is_a_form_error(demo_ns: Any, make_user: Any) -> None:
    client = client_for(make_user("reviewer", demo_ns))
    response = client.post(f"/ns/{demo_ns.name}/cells/alice_home_city/operations/",
                           {"op": "revoke", "reason": ""})
    assert response.status_code == 422 and "Say why" in response.content.decode()
    assert cell_detail(namespace=demo_ns, key="alice_home_city").value == "Lisbon"


def test_resolve_picks_the_winner(demo_ns: Any, make_user: Any) -> None:
    detail = cell_detail(namespace=demo_ns, key="team_meeting_day")
    thursday = detail.alternatives[0]["version"]
    response = client_for(make_user("reviewer", demo_ns)).post(
        f"/ns/{demo_ns.name}/cells/team_meeting_day/operations/",
        {"op": "resolve", "version": thursday, "reason": "calendar"}, **HTMX)
    assert response.status_code == 200
    after = cell_detail(namespace=demo_ns, key="team_meeting_day")
    assert (after.value, after.status) == ("Thursday", "active")


def test_adding_an_observation_records_evidence_and_queues_it_after_commit(
        demo_ns: Any, make_user: Any, django_capture_on_commit_callbacks: Any) -> None:
    user = make_user("reviewer", demo_ns)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client_for(user).post(
            f"/ns/{demo_ns.name}/observations/",
            {"text": "alice_home_city = Oslo", "key": "alice_home_city"}, **HTMX)
    assert response.status_code == 200 and "recorded" in response.content.decode()
    evidence = Evidence.objects.filter(namespace=demo_ns).latest("seq")
    assert (evidence.text, evidence.state, evidence.actor) == (
        "alice_home_city = Oslo", "pending", f"user:{user.username}")
    assert len(callbacks) == 1  # process_observation.delay, once the evidence is committed


def test_a_reviewer_retries_a_failed_observation(demo_ns: Any, make_user: Any,
                                                 django_capture_on_commit_callbacks: Any) -> None:
    evidence = observation_record(namespace=demo_ns, text="x = 1").evidence
    observation_fail(evidence_id=evidence.pk, error="extraction failed: boom")
    client = client_for(make_user("reviewer", demo_ns))
    log = client.get(f"/ns/{demo_ns.name}/operations/").content.decode()
    assert "extraction failed: boom" in log and "Retry" in log
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(f"/ns/{demo_ns.name}/observations/{evidence.pk}/retry/", **HTMX)
    assert response.status_code == 200 and "pmem-changed" in json.loads(response["HX-Trigger"])
    evidence.refresh_from_db()
    assert evidence.state == "pending" and len(callbacks) == 1


def test_the_graph_endpoint_is_the_selectors_graph_plus_operation_links(
        demo_ns: Any, make_user: Any) -> None:
    data = client_for(make_user("viewer", demo_ns)).get(
        f"/ns/{demo_ns.name}/cells/mug_1_location/graph/").json()
    graph = graph_window(cell_lookup(namespace=demo_ns, key="mug_1_location"))
    assert [n["id"] for n in data["nodes"]] == [n["id"] for n in graph["nodes"]]
    assert data["edges"] == graph["edges"]
    assert {e["type"] for e in data["edges"]} == {"supersedes", "supported_by", "revokes"}
    # Each operation is linked to the version it created or targeted.
    versions = {n["id"] for n in graph["nodes"] if n["kind"] == "version"}
    applied = [e for e in data["derived"] if e["type"] == "applied_to"]
    assert applied == [{"source": n["id"], "target": f"v{n['version']}", "type": "applied_to"}
                       for n in graph["nodes"] if n["kind"] == "operation"
                       and f"v{n['version']}" in versions]
    assert applied
    # The retraction's observation supports no version: linked to the operations it caused.
    revoke = Operation.objects.get(namespace=demo_ns, key="mug_1_location", type="revoke")
    assert {"source": f"o{revoke.pk}", "target": f"e{revoke.evidence_id}",
            "type": "caused_by"} in data["derived"]
    assert {e["type"] for e in data["derived"]} == {"applied_to", "caused_by"}


def test_live_answers_204_until_the_namespace_changes(demo_ns: Any, make_user: Any) -> None:
    client = client_for(make_user("viewer", demo_ns))
    fingerprint = live_fingerprint(demo_ns)
    url = f"/ns/{demo_ns.name}/live/"
    assert client.get(url, {"fp": fingerprint}, **HTMX).status_code == 204
    operation_apply(namespace=demo_ns, key="alice_home_city", op="accept", value="Rome",
                    actor="api:test", explicit=True)
    response = client.get(url, {"fp": fingerprint}, **HTMX)
    assert response.status_code == 200 and "pmem-changed" in json.loads(response["HX-Trigger"])
    assert live_fingerprint(demo_ns) in response.content.decode()
    observation_record(namespace=demo_ns, text="pending one")  # a new observation changes it
    assert client.get(url, {"fp": live_fingerprint(demo_ns)}).status_code == 204


def test_frontier_fragment_search_and_filters(demo_ns: Any, make_user: Any) -> None:
    client = client_for(make_user("viewer", demo_ns))
    url = f"/ns/{demo_ns.name}/"
    fragment = client.get(url, {"q": "lisbon"}, HTTP_HX_TARGET="frontier-results", **HTMX)
    body = fragment.content.decode()
    assert body.lstrip().startswith('<section id="frontier-results"') and "<html" not in body
    assert "alice_home_city" in body and "laptop_1_location" not in body
    contested = client.get(url, {"show": "contested"}).content.decode()
    assert "team_meeting_day" in contested and "alice_home_city" not in contested
    empty = client.get(url, {"show": "empty"}).content.decode()
    assert "temp_access_code" in empty and "alice_home_city" not in empty
    recent = client.get(url, {"show": "recent"}).content.decode()
    assert "alice_home_city" in recent  # written moments ago
    page = client.get(url).content.decode()
    assert "resolve by" in page and "user:demo" in page  # last change and by whom


def test_frontier_pages_show_their_position_and_keep_the_search(ns: Any, make_user: Any) -> None:
    for i in range(65):
        operation_apply(namespace=ns, key=f"k{i:03d}", op="accept", value=str(i),
                        actor="api:test", explicit=True)
    client = client_for(make_user("viewer", ns))
    def keys(params: dict[str, str]) -> list[str]:
        body = client.get(f"/ns/{ns.name}/", params).content.decode()
        return re.findall(r'/cells/(k\d{3})/', body)

    first = client.get(f"/ns/{ns.name}/").content.decode()
    assert "1–30 of 65 cells" in first and "page=2" in first and "page 1 of 3" in first
    assert keys({}) == [f"k{i:03d}" for i in range(30)]
    second = client.get(f"/ns/{ns.name}/", {"page": "2"}).content.decode()
    assert "31–60 of 65 cells" in second
    assert keys({"page": "2"}) == [f"k{i:03d}" for i in range(30, 60)]
    assert keys({"page": "3"}) == [f"k{i:03d}" for i in range(60, 65)]
    assert keys({"page": "99"}) == [f"k{i:03d}" for i in range(60, 65)]  # past the end: last
    assert keys({"page": "abc"}) == [f"k{i:03d}" for i in range(30)]  # bad page: the first
    # The pager keeps the search and the order.
    body = client.get(f"/ns/{ns.name}/", {"q": "k0", "sort": "-key"}).content.decode()
    assert "q=k0&amp;sort=-key&amp;page=2" in body


def test_frontier_sorts_by_each_column(ns: Any, make_user: Any) -> None:
    for key, value in (("b_key", "zebra"), ("a_key", "mango"), ("c_key", "apple")):
        operation_apply(namespace=ns, key=key, op="accept", value=value, actor="api:test",
                        explicit=True)
    operation_apply(namespace=ns, key="b_key", op="accept", value="zebra", actor="api:test",
                    explicit=True)  # support 2
    client = client_for(make_user("viewer", ns))
    def order(sort: str) -> list[str]:
        body = client.get(f"/ns/{ns.name}/", {"sort": sort}).content.decode()
        return re.findall(r'/cells/(\w_key)/', body)

    assert order("key") == ["a_key", "b_key", "c_key"]
    assert order("-key") == ["c_key", "b_key", "a_key"]
    assert order("value") == ["c_key", "a_key", "b_key"]
    assert order("support")[0] == "b_key"
    assert order("-changed") == list(reversed(order("changed")))
    assert order("nonsense") == ["a_key", "b_key", "c_key"]
    body = client.get(f"/ns/{ns.name}/", {"sort": "value"}).content.decode()
    assert 'aria-sort="ascending"' in body and "sort=-value" in body


def test_changed_lately_is_newest_first(ns: Any, make_user: Any) -> None:
    for key in ("a_first", "z_second", "m_third"):
        operation_apply(namespace=ns, key=key, op="accept", value="x", actor="api:test",
                        explicit=True)
    body = client_for(make_user("viewer", ns)).get(
        f"/ns/{ns.name}/", {"show": "recent"}).content.decode()
    assert re.findall(r'/cells/(\w+?)/', body) == ["m_third", "z_second", "a_first"]
    assert 'aria-sort="descending"' in body


def test_search_matches_words_inside_keys_and_past_values(demo_ns: Any, make_user: Any) -> None:
    client = client_for(make_user("viewer", demo_ns))
    def found(q: str) -> str:
        return client.get(f"/ns/{demo_ns.name}/", {"q": q}).content.decode()

    assert "/cells/alice_home_city/" in found("alice home")
    assert "/cells/alice_home_city/" in found("home alice")
    assert "/cells/alice_home_city/" in found("alice_home")
    assert "/cells/alice_home_city/" not in found("alice office")
    detail = cell_detail(namespace=demo_ns, key="alice_home_city")
    past = [h["value"] for h in detail.history if h["value"] != detail.value]
    body = found(past[0])
    assert "/cells/alice_home_city/" in body and "matched an earlier value" in body


def test_failed_filter_shows_failed_observations(demo_ns: Any, make_user: Any) -> None:
    evidence = observation_record(namespace=demo_ns, text="garbled").evidence
    observation_fail(evidence_id=evidence.pk, error="commit failed: boom")
    body = client_for(make_user("viewer", demo_ns)).get(
        f"/ns/{demo_ns.name}/", {"show": "failed"}).content.decode()
    assert "garbled" in body and "commit failed: boom" in body
    assert "Retry" not in body  # a viewer cannot retry


def test_operation_log_filters_by_key_and_actor(demo_ns: Any, make_user: Any) -> None:
    client = client_for(make_user("viewer", demo_ns))
    body = client.get(f"/ns/{demo_ns.name}/operations/", {"actor": "user:demo"},
                      HTTP_HX_TARGET="log-results", **HTMX).content.decode()
    assert "confirmed in the staff directory" in body and "rule:" not in body
    body = client.get(f"/ns/{demo_ns.name}/operations/", {"key": "favorite_color"}).content.decode()
    assert "the user corrected it" in body and "expired; must not be reused" not in body


def test_read_page_shows_every_mode_with_its_size(demo_ns: Any, make_user: Any) -> None:
    response = client_for(make_user("viewer", demo_ns)).get(
        f"/ns/{demo_ns.name}/read/", {"q": "where is the laptop", "disclose": ["history"]})
    body = response.content.decode()
    assert response.status_code == 200
    for mode in ("frontier", "raw", "evidence", "raw_ordered", "pruned"):
        assert f'data-mode="{mode}"' in body
    assert "laptop_1_location = desk 1" in body and "[t=" in body
    assert "needs a model" in body and "chars" in body
    # the evidence read's lines say what their fused score is made of
    assert 'data-testid="parts-evidence"' in body and ", words " in body
    assert 'data-testid="parts-raw"' not in body


def test_the_read_page_shows_a_sessions_matched_turns_in_evidence(
        demo_ns: Any, make_user: Any) -> None:
    from memory.services import observation_ingest

    observation_ingest(namespace=demo_ns, messages=[
        {"role": "user", "name": "Ana", "content": "We went kayaking near Sintra."},
        {"role": "assistant", "name": "Bo", "content": "Did you see the Pena palace?"},
        {"role": "user", "name": "Ana", "content": "Yes, and a marmoset on the bridge."}])
    body = client_for(make_user("viewer", demo_ns)).get(
        f"/ns/{demo_ns.name}/read/", {"q": "marmoset"}).content.decode()

    turns = body[body.index('data-testid="turns-evidence"'):]
    turns = turns[:turns.index("</ul>")]
    assert "[3] Ana: Yes, and a marmoset on the bridge." in turns and "kayaking" not in turns
    assert ", words " in turns
    assert 'data-testid="turns-raw"' not in body


def test_an_alias_redirects_to_the_canonical_cell(demo_ns: Any, make_user: Any) -> None:
    from memory.models import Cell, KeyAlias

    cell = Cell.objects.get(namespace=demo_ns, key="alice_home_city")
    KeyAlias.objects.create(namespace=demo_ns, cell=cell, alias="alice_city")
    response = client_for(make_user("viewer", demo_ns)).get(
        f"/ns/{demo_ns.name}/cells/alice_city/")
    assert response.status_code == 302
    assert response["Location"] == f"/ns/{demo_ns.name}/cells/alice_home_city/"


def test_graph_nodes_link_to_a_page_that_shows_the_whole_observation(
        demo_ns: Any, make_user: Any, make_namespace: Any) -> None:
    # A graph node carries the head of an observation's text; the observation's
    # page shows it whole, with its facts and the operations it produced.
    from memory.selectors.shapes import GRAPH_TEXT_CHARS
    from memory.services import observation_ingest

    text = "".join(f"Sentence {i} about the blob. " for i in range(150))
    evidence = observation_ingest(namespace=demo_ns, text=text, source="probe", facts=[
        {"key": "blob", "value": f"value {i}"} for i in range(12)])
    viewer = client_for(make_user("viewer", demo_ns))
    graph = viewer.get(f"/ns/{demo_ns.name}/cells/blob/graph/").json()
    [node] = [n for n in graph["nodes"] if n["kind"] == "evidence"]
    assert node["text"] == text[:GRAPH_TEXT_CHARS] and node["text_truncated"]
    assert node["page"] == f"/ns/{demo_ns.name}/observations/{evidence.pk}/"
    assert node["observation_url"] == f"/api/v1/namespaces/{demo_ns.name}/observations/{evidence.pk}/"
    page = viewer.get(node["page"])
    body = page.content.decode()
    assert page.status_code == 200
    assert "Sentence 149 about the blob." in body  # the end of the text, past the cut
    assert "value 11" in body and f'href="/ns/{demo_ns.name}/cells/blob/"' in body
    assert body.count('class="op op-accept"') == 12
    stranger = client_for(make_user("viewer", make_namespace("elsewhere")))
    assert stranger.get(node["page"]).status_code == 404
    for missing in (evidence.pk + 10_000, 2**63):
        assert viewer.get(f"/ns/{demo_ns.name}/observations/{missing}/").status_code == 404


def test_lists_show_the_head_of_an_observation_and_link_to_it(demo_ns: Any,
                                                              make_user: Any) -> None:
    failed = observation_record(namespace=demo_ns, text="", actor="api", facts=[
        {"key": "bulky", "value": "w" * 4000}]).evidence
    observation_fail(evidence_id=failed.pk, error="a model said no")
    client = client_for(make_user("viewer", demo_ns))
    link = f'href="/ns/{demo_ns.name}/observations/{failed.pk}/"'
    for path in (f"/ns/{demo_ns.name}/?show=failed", f"/ns/{demo_ns.name}/operations/"):
        body = client.get(path).content.decode()
        assert link in body and "bulky" in body and "a model said no" in body
        assert "w" * 300 not in body  # the head of the facts, not a 4 KB value
    mug = Operation.objects.filter(namespace=demo_ns, key="mug_1_location", type="revoke").first()
    log = client.get(f"/ns/{demo_ns.name}/operations/", {"key": "mug_1_location"}).content.decode()
    assert f'href="/ns/{demo_ns.name}/observations/{mug.evidence_id}/"' in log
    assert "reported in error" in log  # the head of the retraction's text, as the row's title
