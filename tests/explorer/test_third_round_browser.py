"""The reviewer's workbench, third round, in Debian's Chromium at 1366×768 and at 390×844:
Retract → Undo → Retract → Undo leaves one value in the history and in the restore list, an
undone resolution brings the alternatives back with their evidence, the confirmation says what
an action will leave (a reject that empties the key says so), the downloads and the log name
versions vN, the queue lists an agent's resolve live, a 500-character value stays inside the
viewport, a form opened before the value changed says so, the log filters by token and time,
and a finger's controls are 44 px tall on a phone. Every test fails on a console error, a
script error or a CSP violation (the browsing fixture)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect

from memory.models import Operation
from memory.services import observation_ingest, operation_apply
from tests.explorer.conftest import Browsing

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

VIEWPORTS = {"desktop": {"width": 1366, "height": 768}, "phone": {"width": 390, "height": 844}}


@pytest.fixture(params=list(VIEWPORTS))
def width(request: Any, browsing: Browsing) -> str:
    browsing.page.set_viewport_size(VIEWPORTS[request.param])
    return str(request.param)


def observe(ns: Any, key: str, value: str, op: str = "accept", source: str = "chat") -> None:
    observation_ingest(namespace=ns, text=f"{key} is {value}", source=source, actor="api:agent",
                       facts=[{"key": key, "value": value, "op": op}])


_LAST: list[Browsing] = []


def _open(b: Browsing, ns: Any, key: str) -> None:
    _LAST[:] = [b]  # the page _wait_ops lets run
    b.goto(f"/ns/{ns.name}/cells/{key}/")
    b.page.wait_for_function("() => window.pmemGraph && window.pmemGraph.renders >= 1")


def _act(b: Browsing, op: str, reason: str, **fields: str) -> None:
    """Open the action's form and send it. The live refresh of an idle form (one nobody typed
    in yet) may redraw it closed between the opening and the typing: then open it again."""
    action = b.page.locator(f"details.action[data-op='{op}']")
    for _attempt in range(5):
        if action.get_attribute("open") is None:
            action.locator("summary").click()
        try:
            action.locator("[name='reason']").fill(reason, timeout=3_000)
            break
        except PlaywrightTimeout:  # redrawn meanwhile: open it again
            continue
    for name, value in fields.items():
        action.locator(f"[name='{name}']").fill(value)
    action.locator("button[type=submit]").click()


def _wait_ops(ns: Any, kind: str, count: int) -> None:
    """Until the log holds ``count`` operations of ``kind``, letting the page run meanwhile
    (Playwright answers the confirmation only while it is called)."""
    b = _LAST[0]
    deadline = time.monotonic() + 30
    while Operation.objects.filter(namespace=ns, type=kind).count() < count:
        assert time.monotonic() < deadline, f"no {count} {kind}"
        b.page.wait_for_timeout(100)


def _fits(b: Browsing) -> None:
    assert b.page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth + 1")


def test_retract_undo_twice_leaves_one_value_and_one_restore(
        browsing: Browsing, width: str, ns: Any, make_user: Any) -> None:
    b = browsing
    b.login(make_user("reviewer", ns))
    observe(ns, "alice_home_city", "Paris")
    observe(ns, "alice_home_city", "Atlantis")
    _open(b, ns, "alice_home_city")
    for n in (1, 2):
        _act(b, "revoke", f"mistake {n}")
        _wait_ops(ns, "revoke", n)
        expect(b.page.get_by_test_id("current-value")).to_have_text("Paris")
        b.page.get_by_test_id("undo").click()
        _wait_ops(ns, "restore", n)
        expect(b.page.get_by_test_id("current-value")).to_have_text("Atlantis")
        expect(b.page.locator(".flash.ok")).to_contain_text("restore of v2")
    expect(b.page.locator(".flash.ok")).not_to_contain_text("compensated")
    # one Atlantis row shows, naming the original; the copy between folds under it
    visible = b.page.locator("table.history tbody tr[data-version]:visible")
    expect(visible).to_have_count(3)  # v4 (the head), v2 (the original), v1
    expect(b.page.locator("#v4").get_by_test_id("restore-of")).to_have_text("restore of v2")
    expect(b.page.locator("#v2").get_by_test_id("restored-as")).to_have_text("restored as v4")
    expect(b.page.locator("#v3")).to_be_hidden()
    b.page.locator("#v4").get_by_test_id("show-copies").click()
    expect(b.page.locator("#v3")).to_be_visible()
    # nothing to restore: the head holds Atlantis; after another value, one Restore for it
    expect(b.page.locator("#restore-actions li")).to_have_count(0)
    _act(b, "accept", "moved", value="Lisbon")
    expect(b.page.get_by_test_id("current-value")).to_have_text("Lisbon")
    expect(b.page.locator("#restore-actions li")).to_have_count(1)
    expect(b.page.locator("#restore-actions li button")).to_have_text("Restore v2")
    _fits(b)


def test_undoing_a_resolution_reopens_with_each_values_evidence(
        browsing: Browsing, width: str, ns: Any, make_user: Any) -> None:
    b = browsing
    b.login(make_user("reviewer", ns))
    observe(ns, "carol_drink", "tea")
    observe(ns, "carol_drink", "coffee", op="contest", source="calendar")
    _open(b, ns, "carol_drink")
    action = b.page.locator("details.action[data-op='resolve']")
    action.get_by_label("coffee", exact=False).check()
    _act(b, "resolve", "asked her")
    _wait_ops(ns, "resolve", 1)
    b.page.get_by_test_id("undo").click()
    expect(b.page.locator(".flash.ok")).to_contain_text("“tea” is back in the contest")
    b.goto(f"/ns/{ns.name}/review/")
    card = b.page.locator("fieldset[data-key='carol_drink']")
    expect(card.get_by_test_id("candidate-evidence")).to_have_count(2)
    expect(card).to_contain_text("carol_drink is tea")
    expect(card).not_to_contain_text("no observation behind it")
    _fits(b)


def test_the_confirmation_says_a_reject_will_empty_the_key(
        browsing: Browsing, width: str, ns: Any, make_user: Any) -> None:
    b = browsing
    asked: list[str] = []
    b.page.on("dialog", lambda dialog: asked.append(dialog.message))
    b.login(make_user("reviewer", ns))
    observe(ns, "carol_drink", "tea")
    observe(ns, "carol_drink", "coffee", op="contest")
    operation_apply(namespace=ns, key="carol_drink", op="resolve", value="coffee",
                    actor="user:x", explicit=True, reason="r")
    _open(b, ns, "carol_drink")
    b.page.locator("details.action[data-op='reject'] summary").click()
    expect(b.page.get_by_test_id("reject-outcome")).to_contain_text("EMPTY")
    _act(b, "reject", "not her drink")
    _wait_ops(ns, "reject", 1)
    assert len(asked) == 1 and "carol_drink will be EMPTY" in asked[0], asked
    expect(b.page.get_by_test_id("current-value")).to_contain_text("empty")


def test_the_retract_confirmation_names_the_value_that_will_hold(
        browsing: Browsing, width: str, ns: Any, make_user: Any) -> None:
    b = browsing
    asked: list[str] = []
    b.page.on("dialog", lambda dialog: asked.append(dialog.message))
    b.login(make_user("reviewer", ns))
    observe(ns, "city", "Paris")
    observe(ns, "city", "Berlin")
    _open(b, ns, "city")
    _act(b, "revoke", "wrong")
    _wait_ops(ns, "revoke", 1)
    assert "the current value will be “Paris” (v1)" in asked[0], asked


def test_an_agents_resolve_appears_in_the_queue_live(
        browsing: Browsing, width: str, ns: Any, make_user: Any) -> None:
    b = browsing
    b.login(make_user("reviewer", ns))
    observe(ns, "gina_phone", "555-1")
    observe(ns, "gina_phone", "555-2", op="contest")
    b.goto(f"/ns/{ns.name}/review/")
    expect(b.page.locator("fieldset[data-key='gina_phone']")).to_be_visible()
    operation_apply(namespace=ns, key="gina_phone", op="resolve", value="555-2",
                    actor="api:planner", explicit=True, reason="the directory says so")
    closed = b.page.get_by_test_id("closed-list")
    expect(closed).to_contain_text("gina_phone", timeout=20_000)
    expect(closed).to_contain_text("api:planner")
    expect(b.page.locator("fieldset[data-key='gina_phone']")).to_have_count(0)
    _fits(b)


def test_a_500_character_value_stays_inside_the_viewport(
        browsing: Browsing, width: str, ns: Any, make_user: Any) -> None:
    b = browsing
    b.login(make_user("reviewer", ns))
    long = "x" * 500
    observe(ns, "long_value", long)
    observe(ns, "short", "y")
    b.goto(f"/ns/{ns.name}/")
    table = b.page.locator("table.frontier")
    expect(table).to_be_visible()
    assert table.bounding_box()["width"] <= VIEWPORTS[width]["width"]
    _fits(b)
    _open(b, ns, "long_value")
    _fits(b)


def test_a_form_opened_before_the_value_changed_says_so(
        browsing: Browsing, width: str, ns: Any, make_user: Any) -> None:
    b = browsing
    b.login(make_user("reviewer", ns))
    observe(ns, "city", "Paris")
    observe(ns, "city", "Berlin")
    _open(b, ns, "city")
    action = b.page.locator("details.action[data-op='revoke']")
    action.locator("summary").click()
    action.locator("[name='reason']").fill("typing a reason")
    observe(ns, "city", "Rome")
    expect(b.page.get_by_test_id("current-value")).to_have_text("Rome", timeout=20_000)
    expect(b.page.get_by_test_id("stale-warning")).to_be_visible()
    expect(action.locator("[name='reason']")).to_have_value("typing a reason")


def test_the_log_filters_by_token_and_time_and_marks_an_undone_row(
        browsing: Browsing, width: str, ns: Any, make_user: Any) -> None:
    b = browsing
    b.login(make_user("reviewer", ns))
    operation_apply(namespace=ns, key="k", op="accept", value="a", actor="api:planner",
                    explicit=True, reason="r")
    accept = operation_apply(namespace=ns, key="k", op="accept", value="b", actor="user:rev",
                             explicit=True, reason="r").operation
    b.goto(f"/ns/{ns.name}/operations/")
    b.page.get_by_test_id(f"log-undo-{accept.pk}").click()
    b.page.locator(f"#op{accept.pk} details.log-undo button[type=submit]").click()
    expect(b.page.get_by_test_id(f"undone-{accept.pk}")).to_be_visible()
    expect(b.page.get_by_test_id(f"log-undo-{accept.pk}")).to_have_count(0)
    b.page.fill("#log-token", "planner")
    expect(b.page.get_by_test_id("actor")).to_have_count(1)
    expect(b.page.get_by_test_id("actor")).to_have_text("api:planner")
    with b.page.expect_response(lambda r: "since=2000" in r.url):
        b.page.fill("#log-since", "2000-01-01T00:00:00")
    expect(b.page.get_by_test_id("actor")).to_have_count(1)
    href = b.page.locator("#log-results a[href*='export.csv']").get_attribute("href") or ""
    assert "token=planner" in href and "since=" in href


def test_a_fingers_controls_are_44_px_on_a_phone(
        browsing: Browsing, ns: Any, make_user: Any) -> None:
    b = browsing
    b.page.set_viewport_size(VIEWPORTS["phone"])
    b.login(make_user("reviewer", ns))
    observe(ns, "city", "Paris")
    observe(ns, "city", "Berlin")
    observe(ns, "city", "Rome", op="contest")
    _open(b, ns, "city")
    b.page.locator("details.action[data-op='resolve']").evaluate("(d) => d.open = true")
    small = b.page.evaluate("""() => {
      const out = [];
      const sel = "#cell-panel button, #cell-panel summary, #cell-panel a.vlink, " +
                  "#cell-panel label.radio, #cell-panel select, " +
                  "#cell-panel input:not([type=hidden]):not([type=radio]):not([type=checkbox])";
      for (const el of document.querySelectorAll(sel)) {
        const r = el.getBoundingClientRect();
        if (r.width === 0 || r.height === 0) continue;  // not shown
        if (r.height < 43.5) out.push(el.outerHTML.slice(0, 80) + " " + r.height);
      }
      return out;
    }""")
    assert small == []
