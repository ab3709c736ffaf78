"""Reading, layout and accessibility of every explorer page in Debian's Chromium:
axe-core finds no serious or critical violation and nothing scrolls sideways at 1366x768 and at
phone width; tables become cards below 640 px; times carry year and zone; long values are
clamped; focus follows an action; the focus ring has 3:1 contrast.

To check a new page, add one line to ``PAGES``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from memory.models import Evidence
from memory.services import operation_apply
from tests.explorer.conftest import PASSWORD, Browsing

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

AXE = Path(__file__).resolve().parents[2] / "node_modules" / "axe-core" / "axe.min.js"
WIDTHS = ({"width": 1366, "height": 768}, {"width": 390, "height": 844})


@dataclass(frozen=True)
class Page:
    name: str
    path: str  # placeholders: {ns}, {key}, {evidence}
    role: str | None = "admin"  # who looks at it (None: nobody logged in)
    status: int = 200


#: Every explorer page the suite checks. A new page: one more line.
PAGES = (
    Page("login", "/accounts/login/", role=None),
    Page("index", "/"),
    Page("frontier", "/ns/{ns}/"),
    Page("frontier-contested", "/ns/{ns}/?show=contested"),
    Page("cell", "/ns/{ns}/cells/{key}/"),
    Page("read", "/ns/{ns}/read/?q=where+is+mug+1&disclose=history"),
    Page("operations", "/ns/{ns}/operations/"),
    Page("erase", "/ns/{ns}/cells/{key}/erase/"),
    Page("access", "/ns/{ns}/access/"),
    Page("webhooks", "/ns/{ns}/webhooks/"),
    Page("observation", "/ns/{ns}/observations/{evidence}/"),
    Page("glossary", "/glossary/"),
    Page("review", "/ns/{ns}/review/"),
    Page("diff", "/ns/{ns}/cells/{key}/diff/"),
    Page("frontier-as-of", "/ns/{ns}/?as_of=2030-01-01T00:00:00Z"),
    Page("cell-as-of", "/ns/{ns}/cells/{key}/?as_of=2030-01-01T00:00:00Z"),
    Page("cell-before-it-existed", "/ns/{ns}/cells/{key}/?as_of=2001-01-01T00:00:00Z"),
    Page("cell-a-version-selected", "/ns/{ns}/cells/{key}/?jump=v2"),
    Page("404", "/ns/{ns}/cells/no_such_key_here/", status=404),
    Page("403", "/ns/{ns}/access/", role="viewer", status=403),
)


def axe_violations(page: Any) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations on the page as it is now."""
    page.add_script_tag(path=str(AXE))
    found = page.evaluate("""async () => {
        const r = await axe.run(document, {resultTypes: ["violations"]});
        return r.violations.filter((v) => v.impact === "serious" || v.impact === "critical")
          .map((v) => ({id: v.id, impact: v.impact, help: v.help,
                        nodes: v.nodes.slice(0, 5).map((n) => n.target.join(" ") + " :: " +
                                                       n.failureSummary)}));
    }""")
    return list(found)


def _path(p: Page, ns: Any) -> str:
    evidence = Evidence.objects.filter(namespace=ns).order_by("seq").first()
    return p.path.format(ns=ns.name, key="mug_1_location", evidence=evidence.pk if evidence else 0)


@pytest.fixture
def axe_context(chromium: Any, live_server: Any) -> Any:
    """A context for axe: its script is injected inline, which the pages' CSP would refuse
    (the CSP itself is checked by every other browser test)."""
    assert AXE.exists(), "npm ci installs axe-core (package.json devDependencies)"
    context = chromium.new_context(viewport=WIDTHS[0], bypass_csp=True)
    yield context
    context.close()


def _login(page: Any, base: str, user: Any) -> None:
    page.goto(base + "/accounts/login/")
    page.fill("#id_username", user.username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(base + "/")


@pytest.mark.parametrize("target", PAGES, ids=[p.name for p in PAGES])
def test_every_page_passes_axe_and_fits_both_widths(target: Page, axe_context: Any,
                                                   live_server: Any, demo_ns: Any,
                                                   make_user: Any) -> None:
    page = axe_context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    if target.role is not None:
        _login(page, live_server.url, make_user(target.role, demo_ns))
    for viewport in WIDTHS:
        page.set_viewport_size(viewport)
        response = page.goto(live_server.url + _path(target, demo_ns))
        assert response is not None and response.status == target.status
        page.wait_for_load_state("networkidle")
        violations = axe_violations(page)
        assert violations == [], f"{target.name} at {viewport['width']} px:\n" + \
            json.dumps(violations, indent=1)
        overflow = page.evaluate("() => document.documentElement.scrollWidth")
        assert overflow <= viewport["width"], \
            f"{target.name} scrolls sideways at {viewport['width']} px ({overflow} px wide)"
    assert errors == []


def test_status_pages_are_styled_and_lead_somewhere(browsing: Browsing, demo_ns: Any,
                                                    make_user: Any) -> None:
    b = browsing
    b.login(make_user("viewer", demo_ns))
    response = b.goto(f"/ns/{demo_ns.name}/cells/nothing_like_this/")
    assert response.status == 404
    expect(b.page.locator("h1")).to_have_text("Nothing here")
    expect(b.page.locator("header.topbar")).to_be_visible()  # the explorer's own layout
    expect(b.page.get_by_role("link", name="Your namespaces")).to_be_visible()
    response = b.goto(f"/ns/{demo_ns.name}/access/")
    assert response.status == 403
    expect(b.page.locator("h1")).to_have_text("You may not do that here")
    b.page.get_by_role("link", name="What each role may do").click()
    expect(b.page.locator("#roles")).to_be_visible()
    b.expect_console_error("status of 404")  # the pages asked for on purpose
    b.expect_console_error("status of 403")


def test_glossary_and_api_docs_are_linked_from_every_page(browsing: Browsing, demo_ns: Any,
                                                          make_user: Any) -> None:
    b = browsing
    b.goto("/accounts/login/")
    expect(b.page.get_by_role("link", name="API docs")).to_have_attribute("href", "/api/docs/")
    b.login(make_user("viewer", demo_ns))
    b.goto(f"/ns/{demo_ns.name}/")
    b.page.get_by_role("navigation", name="Help").get_by_role("link", name="Glossary").click()
    for term in ("frontier", "support", "contested", "contradicted", "revoked", "tombstone"):
        expect(b.page.locator(f"dt#{term}")).to_be_visible()
    assert b.errors == []


def test_tables_become_cards_at_phone_width(browsing: Browsing, demo_ns: Any,
                                            make_user: Any) -> None:
    b = browsing
    b.login(make_user("viewer", demo_ns))
    b.page.set_viewport_size({"width": 390, "height": 844})
    for path in (f"/ns/{demo_ns.name}/", f"/ns/{demo_ns.name}/operations/", "/"):
        b.goto(path)
        row = b.page.locator("table.grid tbody tr").first
        assert row.evaluate("(r) => getComputedStyle(r).display") == "block"
        label = row.locator("td").first.evaluate(
            "(td) => getComputedStyle(td, '::before').content")
        assert label not in ("none", "normal", '""'), path
        width = b.page.evaluate("() => document.documentElement.scrollWidth")
        assert width <= 390, f"{path} is {width} px wide"
        b.shot(f"phone-{path.strip('/').replace('/', '-') or 'index'}")
    # Wide again: a table again.
    b.page.set_viewport_size({"width": 1366, "height": 768})
    b.goto(f"/ns/{demo_ns.name}/")
    assert b.page.locator("table.grid tbody tr").first.evaluate(
        "(r) => getComputedStyle(r).display") == "table-row"
    assert b.errors == []


def test_times_show_year_and_zone_in_local_time_with_utc_on_hover(
        chromium: Any, live_server: Any, demo_ns: Any, make_user: Any) -> None:
    context = chromium.new_context(timezone_id="Asia/Tokyo", locale="en-US")
    try:
        page = context.new_page()
        _login(page, live_server.url, make_user("viewer", demo_ns))
        for path in (f"/ns/{demo_ns.name}/", f"/ns/{demo_ns.name}/operations/"):
            page.goto(live_server.url + path)
            first = page.locator("time[datetime]").first
            expect(first).to_have_attribute("data-localized", "1")
            text, title = first.inner_text(), first.get_attribute("title")
            year = title[:4]
            assert year.isdigit() and year in text, text
            assert "GMT+9" in text, text  # Tokyo's time, named
            assert title.endswith(" UTC"), title
    finally:
        context.close()


def test_a_long_value_is_clamped_with_show_all(browsing: Browsing, demo_ns: Any,
                                               make_user: Any) -> None:
    long_value = ("A very long note about the quarterly plan. " * 32)[:1350]
    operation_apply(namespace=demo_ns, key="plan_note", op="accept", value=long_value,
                    actor="api:test", explicit=True)
    b = browsing
    b.login(make_user("viewer", demo_ns))
    for width in (1366, 390):
        b.page.set_viewport_size({"width": width, "height": 844 if width == 390 else 768})
        b.goto(f"/ns/{demo_ns.name}/cells/plan_note/")
        value = b.page.get_by_test_id("current-value")
        size = float(value.evaluate("(el) => parseFloat(getComputedStyle(el).fontSize)"))
        assert size <= 16, f"a long value is shown at {size}px"
        box = value.bounding_box()
        assert box["height"] < 160, f"a long value takes {box['height']} px at {width} px"
        show_all = b.page.get_by_role("button", name="Show all").first
        show_all.click()
        assert value.bounding_box()["height"] > box["height"]
        expect(b.page.get_by_role("button", name="Show less").first).to_have_attribute(
            "aria-expanded", "true")
    assert b.errors == []


def test_resolve_has_no_winner_chosen_in_advance(browsing: Browsing, demo_ns: Any,
                                                 make_user: Any) -> None:
    b = browsing
    b.login(make_user("reviewer", demo_ns))
    b.goto(f"/ns/{demo_ns.name}/cells/team_meeting_day/")
    action = b.page.locator("details.action[data-op='resolve']")
    expect(action.locator("input[type=radio]")).not_to_have_count(0)
    expect(action.locator("input[type=radio]:checked")).to_have_count(0)
    action.locator("[name='reason']").fill("checked with the team")
    action.locator("button[type=submit]").click()
    # The browser asks for a choice; nothing was sent.
    assert action.locator("input[type=radio]").first.evaluate(
        "(r) => !r.validity.valid")
    from memory.selectors.cells import cell_detail
    assert cell_detail(namespace=demo_ns, key="team_meeting_day").status == "contested"
    assert b.errors == []


def test_focus_moves_to_what_an_action_updated(browsing: Browsing, demo_ns: Any,
                                               make_user: Any) -> None:
    b = browsing
    b.login(make_user("reviewer", demo_ns))
    b.goto(f"/ns/{demo_ns.name}/cells/alice_home_city/")
    action = b.page.locator("details.action[data-op='revoke']")
    action.locator("summary").click()
    action.locator("[name='reason']").fill("reported by mistake")
    action.locator("[name='reason']").press("Enter")
    expect(b.page.locator(".flash.ok")).to_be_visible()
    b.page.wait_for_function(
        "() => document.activeElement && document.activeElement.closest('#cell-panel')")
    focused = b.page.evaluate("() => document.activeElement.className")
    assert "flash" in focused
    # Sorting the frontier from the keyboard keeps focus on the heading pressed.
    b.goto(f"/ns/{demo_ns.name}/")
    heading = b.page.locator("th a.sort", has_text="Current value")
    heading.focus()
    b.page.keyboard.press("Enter")
    expect(b.page.locator("th[aria-sort='ascending']")).to_contain_text("Current value")
    b.page.wait_for_function(
        "() => document.activeElement && document.activeElement.dataset.focusKey === 'sort-value'")
    assert b.errors == []


def test_a_plain_form_answer_focuses_what_to_read_or_correct(browsing: Browsing, demo_ns: Any,
                                                             make_user: Any) -> None:
    b = browsing
    b.login(make_user("admin", demo_ns))
    b.goto(f"/ns/{demo_ns.name}/access/")
    form = b.page.locator("form[aria-label='Add a member or change a role']")
    form.locator("input[name=username]").fill("nobody-by-this-name")
    form.locator("button[type=submit]").click()
    b.page.wait_for_load_state()
    expect(form.locator(".error-text")).to_be_visible()
    expect(b.page.locator("form[aria-label='Add a member or change a role'] "
                          "input[name=username]")).to_be_focused()
    b.goto(f"/ns/{demo_ns.name}/read/")
    b.page.fill("#id_q", "where is mug 1")
    b.page.fill("#id_k", "0")
    b.page.locator("#id_k").evaluate("(k) => k.removeAttribute('min')")  # the server's check
    b.page.click("form.read-form button[type=submit]")
    expect(b.page.locator("form.read-form .flash.error")).to_be_focused()
    b.expect_console_error("status of 4")  # the refused forms answer 4xx on purpose


def _contrast(a: list[float], b: list[float]) -> float:
    def lum(rgb: list[float]) -> float:
        def ch(c: float) -> float:
            c = c / 255
            return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
        r, g, bl = (ch(x) for x in rgb[:3])
        return 0.2126 * r + 0.7152 * g + 0.0722 * bl
    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


RGB = """(el) => {
  const parse = (s) => s.match(/[\\d.]+/g).map(Number);
  let bg = null;
  for (let n = el.parentElement; n; n = n.parentElement) {
    const c = getComputedStyle(n).backgroundColor;
    if (c && !c.startsWith("rgba(0, 0, 0, 0)") && c !== "transparent") { bg = parse(c); break; }
  }
  return {ring: parse(getComputedStyle(el).outlineColor),
          width: parseFloat(getComputedStyle(el).outlineWidth),
          bg: bg || [255, 255, 255]};
}"""


def test_the_focus_ring_has_three_to_one_contrast(browsing: Browsing, demo_ns: Any,
                                                 make_user: Any) -> None:
    b = browsing
    b.login(make_user("reviewer", demo_ns))
    b.goto(f"/ns/{demo_ns.name}/")
    checked = 0
    for _ in range(14):  # the header's links, the search, the filters, the table's links
        b.page.keyboard.press("Tab")
        el = b.page.locator(":focus")
        if el.count() == 0:
            continue
        found = el.evaluate(RGB)
        assert found["width"] >= 2, found
        ratio = _contrast(found["ring"], found["bg"])
        assert ratio >= 3, f"{el.evaluate('(e) => e.outerHTML.slice(0, 80)')}: {ratio:.2f}:1"
        checked += 1
    assert checked >= 10
    assert b.errors == []


def test_compare_reads_explains_marks_and_links(browsing: Browsing, demo_ns: Any,
                                                make_user: Any) -> None:
    b = browsing
    b.login(make_user("viewer", demo_ns))
    b.goto(f"/ns/{demo_ns.name}/read/")
    help_ = b.page.get_by_test_id("mode-help")
    expect(help_).to_contain_text("what an agent reads by default")
    expect(help_.locator(".badge-agent")).to_have_count(1)
    b.page.fill("#id_q", "where is mug 1")
    b.page.click("form.read-form button[type=submit]")
    raw = b.page.locator("section[data-mode='raw_ordered']")
    retracted = raw.locator("li.mark-retraction, li.mark-retracted")
    expect(retracted.first).to_be_visible()
    expect(retracted.first.locator(".badge").first).to_have_text(
        re.compile("retract"))
    expect(b.page.get_by_test_id("needs-model-pruned")).to_contain_text("Needs a language model")
    expect(b.page.get_by_test_id("needs-model-pruned")).not_to_contain_text("PMEM_LLM_BASE_URL",
                                                                            use_inner_text=True)
    frontier = b.page.locator("section[data-mode='frontier']")
    frontier.locator("a.line-cell", has_text="mug_1_location").first.click()
    expect(b.page).to_have_url(b.url(f"/ns/{demo_ns.name}/cells/mug_1_location/"))
    for width in (390, 1366):
        b.page.set_viewport_size({"width": width, "height": 800})
        b.goto(f"/ns/{demo_ns.name}/read/?q=where+is+mug+1")
        b.shot(f"read-{width}")
    assert b.errors == []


def test_search_finds_words_inside_keys_in_the_browser(browsing: Browsing, demo_ns: Any,
                                                      make_user: Any) -> None:
    b = browsing
    b.login(make_user("viewer", demo_ns))
    for viewport in WIDTHS:
        b.page.set_viewport_size(viewport)
        b.goto(f"/ns/{demo_ns.name}/")
        b.page.fill("#q", "alice home")
        expect(b.page.locator("#frontier-results tbody tr")).to_have_count(1)
        expect(b.page.locator("#frontier-results tbody tr")).to_contain_text("alice_home_city")
        expect(b.page.get_by_test_id("position")).to_contain_text("1–1 of 1 cell")
        expect(b.page.locator("#q")).to_be_focused()  # typing keeps focus in the search box
        # Sorting works at either width (the headings are chips on a phone).
        b.page.fill("#q", "")
        expect(b.page.get_by_test_id("position")).to_contain_text("1–7 of 7 cells")
        b.page.locator("th a.sort", has_text="Support").click()
        expect(b.page.locator("th[aria-sort='descending']")).to_contain_text("Support")
    assert b.errors == []


def test_pages_after_an_action_pass_axe(axe_context: Any, live_server: Any, demo_ns: Any,
                                        make_user: Any) -> None:
    # What htmx swaps in (a result message, a searched and sorted table) is checked too.
    page = axe_context.new_page()
    page.on("dialog", lambda dialog: dialog.accept())
    _login(page, live_server.url, make_user("reviewer", demo_ns))
    page.goto(live_server.url + f"/ns/{demo_ns.name}/cells/alice_home_city/")
    action = page.locator("details.action[data-op='revoke']")
    action.locator("summary").click()
    action.locator("[name='reason']").fill("reported by mistake")
    action.locator("button[type=submit]").click()
    expect(page.locator(".flash.ok")).to_be_visible()
    assert axe_violations(page) == []
    page.goto(live_server.url + f"/ns/{demo_ns.name}/")
    page.fill("#q", "location")
    expect(page.get_by_test_id("position")).to_contain_text("matching “location”")
    page.locator("th a.sort", has_text="Last change").click()
    expect(page.locator("th[aria-sort='descending']")).to_contain_text("Last change")
    assert axe_violations(page) == []


def test_the_axe_check_catches_a_violation(axe_context: Any, live_server: Any) -> None:
    # The check above is only as good as its detector: an image without text is critical.
    page = axe_context.new_page()
    page.goto(live_server.url + "/glossary/")
    page.evaluate("() => document.querySelector('main').insertAdjacentHTML("
                  "'beforeend', '<img src=\"/static/explorer/favicon.svg\">')")
    assert "image-alt" in {v["id"] for v in axe_violations(page)}
