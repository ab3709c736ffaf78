"""The reviewer's round trip in Debian's Chromium, at 1366×768 and at 390×844: every version
named by its place in its key (v3, #v3; the global id only as "id N" in the details), a
confirmation asked on submit only and showing what is sent, the details of a graph node or a
timeline bar beside the graph, why a version was retracted wherever it is named, the review
queue's evidence, a key looked at before it existed, and controls that follow each action.
Every test fails on any console error, script error or CSP violation (the browsing fixture)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from playwright.sync_api import expect

from memory.models import Cell, Operation, Version
from memory.services import observation_ingest
from tests.explorer.conftest import Browsing

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

VIEWPORTS = {"desktop": {"width": 1366, "height": 768}, "phone": {"width": 390, "height": 844}}
KEY = "alice_home_city"  # Paris (v1), Berlin (v2), Lisbon (v3, the head)


@pytest.fixture(params=list(VIEWPORTS))
def width(request: Any, browsing: Browsing) -> str:
    browsing.page.set_viewport_size(VIEWPORTS[request.param])
    return str(request.param)


def _open(b: Browsing, ns: Any, key: str = KEY, query: str = "") -> None:
    b.goto(f"/ns/{ns.name}/cells/{key}/{query}")
    b.page.wait_for_function("() => window.pmemGraph && window.pmemGraph.renders >= 1")


def _retract_head(b: Browsing, reason: str) -> None:
    action = b.page.locator("details.action[data-op='revoke']")
    action.locator("summary").click()
    action.locator("[name='reason']").fill(reason)
    done = Operation.objects.filter(type="revoke", reason=reason).count() + 1
    action.locator("button[type=submit]").click()
    # The flash of an earlier action may still show: wait for this one's operation first.
    deadline = time.monotonic() + 30
    while Operation.objects.filter(type="revoke", reason=reason).count() < done:
        assert time.monotonic() < deadline, f"no revoke with reason {reason!r}"
        b.page.wait_for_timeout(100)
    expect(b.page.locator(".flash.ok")).to_be_visible()


def _click_node(b: Browsing, node_id: str) -> None:
    """A click where the graph draws the node (scrolled into view first)."""
    b.page.locator("#graph").scroll_into_view_if_needed()
    b.page.evaluate("(id) => window.pmemGraph.cy.center(window.pmemGraph.cy.getElementById(id))",
                    node_id)
    spot = b.page.evaluate("(id) => window.pmemGraph.cy.getElementById(id).renderedPosition()",
                           node_id)
    box = b.page.locator("#graph").bounding_box()
    b.page.mouse.click(box["x"] + spot["x"], box["y"] + spot["y"])


def test_each_version_is_named_by_its_place_in_its_key(
        browsing: Browsing, width: str, demo_ns: Any, make_user: Any) -> None:
    b = browsing
    user = make_user("reviewer", demo_ns)
    b.login(user)
    _open(b, demo_ns)
    lisbon = Version.objects.get(cell__namespace=demo_ns, cell__key=KEY, value="Lisbon")
    assert lisbon.ordinal == 3
    row = b.page.locator("#v3")
    expect(row).to_have_attribute("data-version", str(lisbon.pk))
    expect(row.locator("a.vlink")).to_have_text("v3")
    expect(b.page.locator("#cell-state a.vlink")).to_have_attribute("href", "#v3")
    # Retracted with a reason: the row, the restore list and the compare page say by whom and why.
    _retract_head(b, "typed the wrong code")
    who = f"user:{user.username}"
    expect(b.page.get_by_test_id("retraction-3")).to_have_text(f"by {who} — ‘typed the wrong code’")
    item = b.page.locator(f"#restore-actions li[data-version='{lisbon.pk}']")
    expect(item).to_contain_text("v3 Lisbon")
    expect(item).to_contain_text(f"revoked by {who}")
    expect(item.get_by_test_id("restore-why-3")).to_have_text("— ‘typed the wrong code’")
    expect(item.locator("button")).to_have_text("Restore v3")
    assert f"version {lisbon.pk}" not in b.page.locator("#cell-panel").inner_text()
    # The row's link selects the node, puts #v3 in the URL; the details give the id once.
    b.page.locator("#v3 a.vlink").click()
    b.page.wait_for_function("(id) => document.getElementById('graph').dataset.selected === id",
                             arg=f"v{lisbon.pk}")
    assert b.page.evaluate("() => location.hash") == "#v3"
    details = b.page.locator("#node-details")
    expect(details.locator("h2")).to_have_text("Version v3")
    expect(details).to_contain_text(f"id {lisbon.pk}")
    expect(details).to_contain_text("v3 supersedes v2")
    # A bookmark of #v2 opens the page with the key's second version selected.
    berlin = Version.objects.get(cell__namespace=demo_ns, cell__key=KEY, value="Berlin")
    _open(b, demo_ns, query="#v2")
    b.page.wait_for_function("(id) => document.getElementById('graph').dataset.selected === id",
                             arg=f"v{berlin.pk}")
    # Compare, the log and the observation page use the same names.
    b.goto(f"/ns/{demo_ns.name}/cells/{KEY}/diff/?a={lisbon.pk}&b={berlin.pk}")
    expect(b.page.locator(".diff-side h2").first).to_contain_text("v3")
    expect(b.page.get_by_test_id("diff-retraction")).to_have_text(
        f"by {who} — ‘typed the wrong code’")
    expect(b.page.locator("#diff-a-v")).to_have_value("v3")
    b.goto(f"/ns/{demo_ns.name}/operations/?key={KEY}")
    expect(b.page.locator(f"#log-results a[href$='/cells/{KEY}/#v3']").first).to_have_text("v3")


def test_the_confirmation_comes_on_submit_with_version_value_and_reason(
        browsing: Browsing, width: str, demo_ns: Any, make_user: Any) -> None:
    b = browsing
    asked: list[str] = []
    b.page.on("dialog", lambda dialog: asked.append(dialog.message))
    b.login(make_user("reviewer", demo_ns))
    _open(b, demo_ns)
    action = b.page.locator("details.action[data-op='revoke']")
    action.locator("summary").click()
    # Typing in "Find a version" searches, and asks nothing.
    with b.page.expect_response(lambda r: "/versions/" in r.url or "choices" in r.url):
        b.page.fill("#revoke-search", "Berl")
    expect(action.locator("#revoke-choices label")).to_have_count(1)
    expect(action.locator("#revoke-choices")).to_contain_text("v2: Berlin")
    # "Retract this version…" from a row chooses it, and asks nothing either.
    b.page.locator("#v1 button.expand").click()
    paris = Version.objects.get(cell__namespace=demo_ns, cell__key=KEY, value="Paris")
    b.page.get_by_test_id(f"provenance-{paris.pk}").locator("button[data-retract]").click()
    expect(action.locator(f"input[type=radio][value='{paris.pk}']")).to_be_checked()
    assert asked == []
    action.locator("[name='reason']").fill("never lived there")
    action.locator("button[type=submit]").click()
    expect(b.page.locator(".flash.ok")).to_be_visible()
    assert len(asked) == 1
    assert "Retract the selected version" in asked[0]
    assert "Version: v1: Paris" in asked[0] and "Reason: never lived there" in asked[0]
    paris.refresh_from_db()
    assert paris.status == "revoked"


def test_a_key_before_it_existed_says_so_and_links_to_its_first_version(
        browsing: Browsing, width: str, demo_ns: Any, make_user: Any) -> None:
    b = browsing
    b.login(make_user("viewer", demo_ns))
    _open(b, demo_ns, query="?as_of=2001-01-01T00:00:00Z")
    note = b.page.get_by_test_id("before-first")
    expect(note).to_contain_text(f"{KEY} did not exist yet at that time.")
    expect(b.page.locator("#graph-window-status")).to_have_text("No versions.")
    expect(b.page.locator("#timeline .timeline-summary")).to_have_text("No versions.")
    note.get_by_test_id("first-version").click()
    expect(b.page.get_by_test_id("current-value")).to_have_text("Paris")
    expect(b.page.get_by_test_id("as-of-banner")).to_be_visible()


def test_a_node_or_a_bar_shows_its_details_beside_the_graph(
        browsing: Browsing, width: str, demo_ns: Any, make_user: Any) -> None:
    b = browsing
    b.login(make_user("viewer", demo_ns))
    _open(b, demo_ns, "mug_1_location")
    revoked = Version.objects.get(cell__namespace=demo_ns, cell__key="mug_1_location",
                                  status="revoked")
    _click_node(b, f"v{revoked.pk}")
    details = b.page.locator("#node-details")
    expect(details.locator("h2")).to_have_text(f"Version v{revoked.ordinal}")
    expect(details).to_be_in_viewport()
    # value, validity, each operation with actor, method and reason, and the evidence text
    revoke = Operation.objects.get(namespace=demo_ns, key="mug_1_location", type="revoke")
    for text in ("cabinet 3", "Valid", f"revoke by {revoke.actor}", "mug 1 has been moved"):
        expect(details).to_contain_text(text)
    graph, box = b.page.evaluate("""() => ['#graph', '#node-details'].map((s) => {
        const r = document.querySelector(s).getBoundingClientRect();
        return {x: r.x, y: r.y, width: r.width, height: r.height}; })""")  # one moment
    if width == "desktop":  # beside the graph
        assert box["x"] >= graph["x"] + graph["width"] - 1 and box["y"] < graph["y"] + 50
    else:  # under it
        assert box["y"] >= graph["y"] + graph["height"] - 1
    # A timeline bar: its newest version, in the same place.
    b.page.evaluate("() => window.scrollTo(0, 0)")
    bar = b.page.locator("#timeline button.tl-bucket:not([disabled])").first
    bar.click()
    expect(details.locator("h2")).to_have_text("Version v1")
    expect(details).to_be_in_viewport()
    # Labels are at least 11 px on screen when the graph is drawn, and the axis has real ticks.
    assert b.page.evaluate("() => window.pmemGraph.cy.zoom() * 12") >= 11
    ticks = b.page.locator("#timeline .tl-tick").all_inner_texts()
    assert len(ticks) >= 2 and len(set(ticks)) == len(ticks), ticks
    expect(b.page.locator("ul.legend")).to_have_count(1)


def test_the_review_queue_shows_the_evidence_behind_each_value(
        browsing: Browsing, width: str, demo_ns: Any, make_user: Any) -> None:
    b = browsing
    b.login(make_user("reviewer", demo_ns))
    b.goto(f"/ns/{demo_ns.name}/review/")
    contest = b.page.locator("fieldset.contest[data-key='team_meeting_day']")
    evidence = contest.get_by_test_id("candidate-evidence")
    expect(evidence).to_have_count(2)
    expect(evidence.nth(1)).to_contain_text("source calendar")
    expect(contest).to_contain_text("v1")
    expect(contest).to_contain_text("v2")
    contest.get_by_test_id("compare-candidates").click()
    expect(b.page.get_by_test_id("diff")).to_contain_text("Thursday")


def test_undo_takes_a_reason_and_the_controls_follow_the_action(
        browsing: Browsing, width: str, demo_ns: Any, make_user: Any) -> None:
    b = browsing
    b.login(make_user("reviewer", demo_ns))
    _open(b, demo_ns)
    back = b.page.get_by_test_id("as-of-back")
    before = back.inner_text()
    _retract_head(b, "typed the wrong code")
    expect(back).not_to_have_text(before)  # the step back now names the retraction
    expect(back).to_contain_text("revoke")
    b.page.get_by_test_id("undo-reason").fill("it was right after all")
    b.page.get_by_test_id("undo").click()
    expect(b.page.get_by_test_id("current-value")).to_have_text("Lisbon")
    restore = Operation.objects.filter(namespace=demo_ns, key=KEY, type="restore").get()
    assert restore.reason == "it was right after all"
    # A restore may go without a reason.
    _retract_head(b, "once more")
    lisbon = Version.objects.filter(cell__namespace=demo_ns, cell__key=KEY, value="Lisbon",
                                    status="revoked").order_by("id").first()
    b.page.get_by_test_id(f"restore-{lisbon.pk}").click()
    expect(b.page.get_by_test_id("current-value")).to_have_text("Lisbon")


def test_history_pages_from_the_top_and_older_shows_the_list_from_its_start(
        browsing: Browsing, width: str, demo_ns: Any, make_user: Any) -> None:
    for i in range(6):
        observation_ingest(namespace=demo_ns, source="gps", actor="api:robot", text=f"fix {i}",
                           facts=[{"key": "rover", "value": f"at {i}.{j}"} for j in range(10)])
    assert Cell.objects.get(namespace=demo_ns, key="rover").version_count == 60
    b = browsing
    b.login(make_user("viewer", demo_ns))
    _open(b, demo_ns, "rover")
    expect(b.page.get_by_test_id("history-older-top")).to_be_visible()
    b.page.get_by_test_id("history-older").click()
    expect(b.page.get_by_test_id("history-position")).to_have_text("Versions v10–v1 of 60")
    b.page.wait_for_timeout(400)  # the smooth scroll to the list's top
    top = b.page.locator("#cell-history").bounding_box()["y"]
    assert -2 <= top <= VIEWPORTS[width]["height"] / 2
    # The list follows a version chosen in the graph: a jump to v45 shows the page it starts.
    b.page.fill("#jump-to", "v45")
    b.page.press("#jump-to", "Enter")
    expect(b.page.get_by_test_id("history-position")).to_have_text("Versions v45–v1 of 60")
    expect(b.page.locator("#v45")).to_have_class("st-superseded selected")


def test_a_touch_screen_gets_touch_words_and_finger_sized_controls(
        chromium: Any, live_server: Any, demo_ns: Any, make_user: Any) -> None:
    b = Browsing(chromium, live_server.url, viewport=VIEWPORTS["phone"], has_touch=True,
                 is_mobile=True)
    try:
        b.login(make_user("reviewer", demo_ns))
        _open(b, demo_ns)
        expect(b.page.locator(".hint-touch")).to_be_visible()
        expect(b.page.locator(".hint-mouse")).to_be_hidden()
        # As of sits above the panel and the graph, near the top of the page.
        assert b.page.locator("form.as-of").bounding_box()["y"] < 400
        for selector in ("#v3 button.expand", "#graph-zoom-in", "details.action summary"):
            box = b.page.locator(selector).first.bounding_box()
            assert box["width"] >= 44 and box["height"] >= 44, (selector, box)
        b.assert_no_csp_violation()
        b.assert_no_error()
    finally:
        b.context.close()


def test_the_log_reads_as_sentences_and_keeps_an_undo_for_each_entry(
        browsing: Browsing, width: str, demo_ns: Any, make_user: Any) -> None:
    b = browsing
    b.login(make_user("reviewer", demo_ns))
    _open(b, demo_ns)
    _retract_head(b, "typed the wrong code")
    b.goto(f"/ns/{demo_ns.name}/operations/?key={KEY}")
    revoke = Operation.objects.get(namespace=demo_ns, key=KEY, type="revoke")
    row = b.page.locator(f"#op{revoke.pk}")
    expect(row.locator(".op-words")).to_have_text("“Lisbon” was retracted")
    expect(row.locator("a.op")).to_have_attribute("href", "/glossary/#retract")
    reinstate = Operation.objects.get(namespace=demo_ns, key=KEY, type="reinstate")
    expect(b.page.locator(f"#op{reinstate.pk} .op-words")).to_have_text(
        "“Berlin” came back because the newer value was retracted (the second line of a revoke)")
    # Undo from the log entry, long after the page that offered it is gone, with a reason.
    row.get_by_test_id(f"log-undo-{revoke.pk}").click()
    row.locator("[name='reason']").fill("wrong key")
    row.locator("button[type=submit]").click()
    expect(b.page.locator(f"#op{revoke.pk}")).to_be_visible()
    restore = Operation.objects.get(namespace=demo_ns, key=KEY, type="restore")
    assert restore.reason == "wrong key"
    _open(b, demo_ns)
    expect(b.page.get_by_test_id("current-value")).to_have_text("Lisbon")
