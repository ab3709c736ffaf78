"""The explorer in a real browser: headless Chromium against the live server and PostgreSQL.

Each test fails on any browser console error. Screenshots of every page land in
tests/artifacts/ (1366x768) for a person to look at.
"""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from memory.models import Membership, Operation
from memory.selectors.cells import cell_detail, cell_lookup
from memory.selectors.graph import graph_window
from tests.explorer.conftest import Browsing

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _open_cell(b: Browsing, ns: Any, key: str) -> None:
    b.goto(f"/ns/{ns.name}/cells/{key}/")
    # An arrow function: Playwright eval()s a bare expression in the page, which the CSP refuses.
    b.page.wait_for_function("() => window.pmemGraph && window.pmemGraph.renders >= 1")


def _graph_counts(b: Browsing) -> dict[str, int]:
    return b.page.evaluate("({nodes: window.pmemGraph.nodes, edges: window.pmemGraph.edges,"
                           " typed: window.pmemGraph.typed, derived: window.pmemGraph.derived})")


def _served(b: Browsing, ns: Any, key: str) -> dict[str, Any]:
    """The graph window the server sends for ``key`` (what the page must draw)."""
    return b.page.request.get(b.url(f"/ns/{ns.name}/cells/{key}/graph/")).json()


def _wait_graph_matches(b: Browsing, ns: Any, key: str) -> None:
    graph = _served(b, ns, key)
    b.page.wait_for_function(
        "([n, e]) => window.pmemGraph.nodes === n && window.pmemGraph.edges === e",
        arg=[len(graph["nodes"]), len(graph["edges"]) + len(graph["derived"])])


def _act(b: Browsing, op: str, reason: str, **fields: str) -> None:
    """Open an action's disclosure, fill it in and submit (the confirm dialog is accepted)."""
    action = b.page.locator(f"details.action[data-op='{op}']")
    if action.get_attribute("open") is None:
        action.locator("summary").click()
    for name, value in fields.items():
        action.locator(f"[name='{name}']").fill(value)
    action.locator("[name='reason']").fill(reason)
    action.locator("button[type=submit]").click()


def test_login_lists_namespaces_and_the_frontier(browsing: Browsing, demo_ns: Any,
                                                 make_user: Any) -> None:
    b = browsing
    b.goto("/")
    expect(b.page).to_have_url(b.url("/accounts/login/?next=/"))
    b.shot("login")
    b.login(make_user("reviewer", demo_ns))
    row = b.page.locator("table.grid tbody tr", has_text=demo_ns.name)
    expect(row).to_be_visible()
    expect(row.locator("td.num").first).to_have_text("7")  # cells
    b.shot("index")
    row.locator("a", has_text=demo_ns.name).click()
    expect(b.page.locator("#frontier-results table tbody tr")).to_have_count(7)
    contested = b.page.locator("#frontier-results tr", has_text="team_meeting_day")
    expect(contested.locator(".badge")).to_have_text("contested")
    expect(b.page.locator("#frontier-results tr", has_text="temp_access_code")
           .locator(".badge")).to_have_text("empty")
    b.shot("frontier")
    b.page.fill("#q", "laptop")
    expect(b.page.locator("#frontier-results table tbody tr")).to_have_count(1)
    b.page.fill("#q", "")
    b.page.locator("label.chip", has_text="contested").click()
    expect(b.page.locator("#frontier-results table tbody tr")).to_have_count(1)
    assert b.errors == []


def test_cell_graph_draws_the_selectors_nodes_and_edges(browsing: Browsing, demo_ns: Any,
                                                        make_user: Any) -> None:
    b = browsing
    b.login(make_user("reviewer", demo_ns))
    for key in ("laptop_1_location", "mug_1_location", "team_meeting_day", "project_lead",
                "temp_access_code"):
        _open_cell(b, demo_ns, key)
        # A short key: the window is all of it.
        graph = graph_window(cell_lookup(namespace=demo_ns, key=key))
        served = _served(b, demo_ns, key)
        assert [n["id"] for n in served["nodes"]] == [n["id"] for n in graph["nodes"]]
        assert served["edges"] == graph["edges"]
        derived = served["derived"]
        counts = _graph_counts(b)
        assert counts == {"nodes": len(graph["nodes"]), "typed": len(graph["edges"]),
                          "derived": len(derived), "edges": len(graph["edges"]) + len(derived)}
        b.shot(f"cell-{key}")
    # Clicking the newest version node shows its details.
    _open_cell(b, demo_ns, "laptop_1_location")
    point = b.page.evaluate("""() => {
        const n = window.pmemGraph.cy.nodes('[kind = "version"]').last();
        const p = n.renderedPosition(); return {x: p.x, y: p.y}; }""")
    box = b.page.locator("#graph").bounding_box()
    b.page.mouse.click(box["x"] + point["x"], box["y"] + point["y"])
    details = b.page.locator("#node-details")
    expect(details).to_contain_text("desk 1")
    expect(details).to_contain_text("active")
    expect(details).to_contain_text("Valid")
    b.shot("cell-node-details")
    # The history is readable without the graph.
    expect(b.page.locator("table.history tbody tr[data-version]")).to_have_count(9)
    assert b.errors == []


def test_retract_reinstates_the_predecessor_in_page_and_database(
        browsing: Browsing, demo_ns: Any, make_user: Any) -> None:
    b = browsing
    user = make_user("reviewer", demo_ns)
    b.login(user)
    _open_cell(b, demo_ns, "alice_home_city")
    expect(b.page.get_by_test_id("current-value")).to_have_text("Lisbon")
    _act(b, "revoke", "reported by mistake")
    expect(b.page.get_by_test_id("current-value")).to_have_text("Berlin")
    expect(b.page.locator(".flash.ok")).to_contain_text("Current value: Berlin")
    detail = cell_detail(namespace=demo_ns, key="alice_home_city")
    assert detail.value == "Berlin" and detail.status == "active"
    op = Operation.objects.filter(namespace=demo_ns, type="revoke").order_by("-id").first()
    assert op.actor == f"user:{user.username}" and op.reason == "reported by mistake"
    _wait_graph_matches(b, demo_ns, "alice_home_city")  # redrawn in place, tombstone included
    assert b.page.evaluate("window.pmemGraph.cy.nodes('[kind = \"tombstone\"]').length") == 1
    b.shot("cell-after-retract")
    assert b.errors == []


def test_resolve_a_contest(browsing: Browsing, demo_ns: Any, make_user: Any) -> None:
    b = browsing
    b.login(make_user("reviewer", demo_ns))
    _open_cell(b, demo_ns, "team_meeting_day")
    expect(b.page.locator("#cell-state .current .badge")).to_have_text("contested")
    action = b.page.locator("details.action[data-op='resolve']")
    action.get_by_label("Thursday", exact=False).check()
    _act(b, "resolve", "the calendar is authoritative")
    expect(b.page.get_by_test_id("current-value")).to_have_text("Thursday")
    expect(b.page.locator("#cell-state .current .badge")).to_have_text("active")
    detail = cell_detail(namespace=demo_ns, key="team_meeting_day")
    assert (detail.value, detail.status, detail.alternatives) == ("Thursday", "active", [])
    assert [h["status"] for h in detail.history] == ["active", "contradicted"]
    _wait_graph_matches(b, demo_ns, "team_meeting_day")
    assert b.errors == []


def test_an_invalid_operation_shows_its_reason_inline(browsing: Browsing, demo_ns: Any,
                                                      make_user: Any) -> None:
    b = browsing
    b.login(make_user("reviewer", demo_ns))
    _open_cell(b, demo_ns, "alice_home_city")
    _act(b, "reject", "testing", value="Lisbon")  # rejecting the head with itself: invalid
    expect(b.page.locator(".flash.error")).to_contain_text("Refused:")
    expect(b.page.get_by_test_id("current-value")).to_have_text("Lisbon")
    b.shot("cell-refused")
    assert b.errors == []


@pytest.mark.worker
def test_an_added_observation_appears_when_the_worker_commits(
        browsing: Browsing, demo_ns: Any, make_user: Any, celery_worker_proc: Any) -> None:
    celery_worker_proc()  # no model: the rule extractor reads "key = value"
    b = browsing
    b.login(make_user("reviewer", demo_ns))
    _open_cell(b, demo_ns, "alice_home_city")
    renders = b.page.evaluate("window.pmemGraph.renders")
    action = b.page.locator("details.action[data-op='observe']")
    action.locator("summary").click()
    action.locator("[name='text']").fill("alice_home_city = Rome")
    action.locator("button[type=submit]").click()
    expect(b.page.locator(".flash.ok")).to_contain_text("recorded")
    # No reload: the live poller notices the worker's commit and re-renders the panel and graph.
    expect(b.page.get_by_test_id("current-value")).to_have_text("Rome", timeout=30_000)
    b.page.wait_for_function("(r) => window.pmemGraph.renders > r", arg=renders)
    _wait_graph_matches(b, demo_ns, "alice_home_city")
    assert cell_detail(namespace=demo_ns, key="alice_home_city").value == "Rome"
    b.shot("cell-after-observation")
    assert b.errors == []


def test_a_non_member_gets_404(browsing: Browsing, demo_ns: Any, make_user: Any) -> None:
    b = browsing
    b.login(make_user(None))
    for path in (f"/ns/{demo_ns.name}/", f"/ns/{demo_ns.name}/cells/alice_home_city/",
                 f"/ns/{demo_ns.name}/operations/", f"/ns/{demo_ns.name}/read/"):
        assert b.goto(path).status == 404
    b.goto("/")
    expect(b.page.locator("body")).not_to_contain_text(demo_ns.name)
    # (the 404 page loads themselves are the only console errors: the point of the test)
    b.expect_console_error("status of 404")


def test_a_viewer_sees_no_actions_and_a_forged_post_is_refused(
        browsing: Browsing, demo_ns: Any, make_user: Any) -> None:
    b = browsing
    b.login(make_user(Membership.Role.VIEWER, demo_ns))
    _open_cell(b, demo_ns, "alice_home_city")
    expect(b.page.locator("#cell-actions")).to_have_count(0)
    expect(b.page.locator("form[action*='operations']")).to_have_count(0)
    b.shot("cell-viewer")
    response = b.page.request.post(
        b.url(f"/ns/{demo_ns.name}/cells/alice_home_city/operations/"),
        form={"op": "revoke", "reason": "forged"},
        headers={"X-CSRFToken": b.csrf_token(), "HX-Request": "true"})
    assert response.status == 403
    assert cell_detail(namespace=demo_ns, key="alice_home_city").value == "Lisbon"
    assert b.errors == []


def test_read_modes_side_by_side_and_the_operation_log(browsing: Browsing, demo_ns: Any,
                                                       make_user: Any) -> None:
    b = browsing
    b.login(make_user("reviewer", demo_ns))
    b.goto(f"/ns/{demo_ns.name}/read/")
    b.page.fill("#id_q", "where is laptop 1")
    b.page.get_by_label("history").check()
    b.page.click("form.read-form button[type=submit]")
    for mode in ("frontier", "raw", "evidence", "raw_ordered", "pruned"):
        expect(b.page.locator(f"section[data-mode='{mode}']")).to_be_visible()
    frontier = b.page.locator("section[data-mode='frontier'] pre.context")
    expect(frontier).to_contain_text("laptop_1_location = desk 1")
    expect(b.page.locator("section[data-mode='raw_ordered'] pre.context")).to_contain_text("[t=")
    expect(b.page.locator("section[data-mode='pruned']")).to_contain_text("needs a model")
    chars = int(b.page.get_by_test_id("chars-frontier").inner_text())
    assert chars == len(frontier.inner_text().strip()) or chars > 0
    b.shot("read")
    b.goto(f"/ns/{demo_ns.name}/operations/")
    expect(b.page.locator("#log-results tbody tr").first).to_be_visible()
    b.page.fill("#log-actor", "user:demo")
    expect(b.page.locator("#log-results tbody tr")).to_have_count(
        Operation.objects.filter(namespace=demo_ns, actor="user:demo").count())
    b.shot("operations")
    assert b.errors == []


def test_an_operation_node_shows_its_observation_and_links_to_the_whole(
        browsing: Browsing, demo_ns: Any, make_user: Any) -> None:
    # The retraction's observation supports no version; its text is held once, on its
    # evidence node, and the revoke's details still say why.
    b = browsing
    b.login(make_user("viewer", demo_ns))
    _open_cell(b, demo_ns, "mug_1_location")
    point = b.page.evaluate("""() => {
        const n = window.pmemGraph.cy.nodes('[kind = "operation"]').filter(
            (x) => x.data('label') === 'revoke').first();
        const p = n.renderedPosition(); return {x: p.x, y: p.y}; }""")
    box = b.page.locator("#graph").bounding_box()
    b.page.mouse.click(box["x"] + point["x"], box["y"] + point["y"])
    details = b.page.locator("#node-details")
    expect(details).to_contain_text("The move of mug 1 to cabinet 3 was reported in error.")
    b.shot("cell-operation-details")
    details.locator("a", has_text="observation #").click()
    expect(b.page.locator("[data-testid=observation-text]")).to_have_text(
        "The move of mug 1 to cabinet 3 was reported in error.")
    expect(b.page.locator("table.log .op-revoke")).to_have_count(1)
    b.shot("observation")
    assert b.errors == []
