"""The reviewer's workbench, fourth round, in Debian's Chromium at 1366×768 and at 390×844: the
graph pages by what its view shows (Older twice, then Newer, walks back exactly), opens on the
current value, draws a readable summary instead of specks when zoomed out, keeps a version's
evidence in view after a jump; compare finds any version by its vN or its words and shows a
contest as current value against challenger; the timeline's bars are a finger wide on a phone
and its labels never overlap; every time reads in one shape. Every test fails on a console
error, a script error or a CSP violation (the browsing fixture)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from memory.models import Version
from memory.services import observation_ingest, operation_apply
from tests.explorer.conftest import Browsing
from tests.explorer.test_polish_browser import axe_context, axe_violations  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

VIEWPORTS = {"desktop": {"width": 1366, "height": 768}, "phone": {"width": 390, "height": 844}}
STATUS = "#graph-window-status"


@pytest.fixture(params=list(VIEWPORTS))
def width(request: Any, browsing: Browsing) -> str:
    browsing.page.set_viewport_size(VIEWPORTS[request.param])
    return str(request.param)


def accept(ns: Any, key: str, count: int, start: int = 0) -> None:
    for i in range(start, start + count):
        operation_apply(namespace=ns, key=key, op="accept", value=f"spot {i}", actor="api:robot",
                        explicit=True, reason="moved")


def observe(ns: Any, key: str, value: str, op: str = "accept", source: str = "chat") -> None:
    observation_ingest(namespace=ns, text=f"{key} is {value}", source=source, actor="api:agent",
                       facts=[{"key": key, "value": value, "op": op}])


def _open(b: Browsing, ns: Any, key: str, query: str = "") -> None:
    b.goto(f"/ns/{ns.name}/cells/{key}/{query}")
    b.page.wait_for_function("() => window.pmemGraph && window.pmemGraph.renders >= 1")


def _shown(b: Browsing) -> tuple[int, int]:
    """The range the status says the view holds."""
    text = b.page.locator(STATUS).inner_text()
    m = re.match(r"Showing v(\d+)(?:–v(\d+))? of", text)
    assert m, text
    return int(m.group(1)), int(m.group(2) or m.group(1))


def _expect_shown(b: Browsing, lo: int, hi: int, total: int) -> None:
    expect(b.page.locator(STATUS)).to_have_text(re.compile(f"^Showing v{lo}–v{hi} of {total}"))


def test_older_and_newer_page_by_what_the_view_shows(
        browsing: Browsing, width: str, ns: Any, make_user: Any) -> None:
    b = browsing
    b.login(make_user("viewer", ns))
    accept(ns, "robot", 120)
    _open(b, ns, "robot")
    lo, hi = _shown(b)
    assert hi == 120
    n = hi - lo + 1
    assert 2 <= n < 40
    expect(b.page.locator("#graph-newer")).to_be_disabled()
    b.page.click("#graph-older")
    _expect_shown(b, lo - n, lo - 1, 120)
    # Newer comes back as soon as the view has left the newest end
    expect(b.page.locator("#graph-newer")).to_be_enabled()
    expect(b.page.locator("#graph-newer")).to_contain_text(f"({n})")
    b.page.click("#graph-older")
    _expect_shown(b, lo - 2 * n, lo - n - 1, 120)
    expect(b.page.locator("#graph-newer")).to_be_enabled()
    b.page.click("#graph-newer")
    _expect_shown(b, lo - n, lo - 1, 120)
    b.page.click("#graph-newer")
    _expect_shown(b, lo, 120, 120)
    expect(b.page.locator("#graph-newer")).to_be_disabled()
    # paging past what the first window loaded fetches more in place, down to v1
    for _ in range(200):
        before = b.page.locator(STATUS).inner_text()
        if b.page.locator("#graph-older").is_disabled():
            break
        b.page.click("#graph-older")
        expect(b.page.locator(STATUS)).not_to_have_text(before)
    first, last = _shown(b)
    assert first == 1 and last - first + 1 == n
    b.shot(f"graph-paged-{width}")


def test_the_graph_opens_on_the_current_value(
        browsing: Browsing, width: str, ns: Any, make_user: Any) -> None:
    b = browsing
    b.login(make_user("viewer", ns))
    accept(ns, "robot", 40)
    for _ in range(12):  # the newest twelve retracted: v28 holds
        operation_apply(namespace=ns, key="robot", op="revoke", actor="user:rev", explicit=True,
                        reason="wrong")
    head = Version.objects.get(cell__namespace=ns, cell__key="robot", ordinal=28)
    assert head.status == "active"
    _open(b, ns, "robot")
    lo, hi = _shown(b)
    assert lo <= 28 <= hi, (lo, hi)
    assert b.page.evaluate(f"""() => {{ const n = window.pmemGraph.cy.getElementById('v{head.pk}');
        return n.hasClass('head'); }}""")


def test_fit_on_a_long_window_draws_a_readable_summary(
        browsing: Browsing, width: str, ns: Any, make_user: Any) -> None:
    b = browsing
    b.login(make_user("viewer", ns))
    accept(ns, "robot", 120)
    _open(b, ns, "robot")
    b.page.click("#graph-fit")
    b.page.wait_for_selector("#graph[data-mode='summary']")
    expect(b.page.locator(STATUS)).to_have_text(re.compile(r"^Summary of v81–v120 of 120 in \d+ groups"))
    groups = b.page.evaluate("""() => { const cy = window.pmemGraph.cy;
        return cy.nodes().map((n) => ({ kind: n.data('kind'), first: n.data('first'),
            last: n.data('last'), px: parseFloat(n.style('font-size')) * cy.zoom(),
            box: n.renderedBoundingBox(), label: n.data('label') })); }""")
    assert groups and all(g["kind"] == "group" for g in groups)
    assert groups[0]["first"] == 81 and max(g["last"] for g in groups) == 120
    assert all(g["px"] >= 11 for g in groups), [g["px"] for g in groups]  # legible, no specks
    boxes = [g["box"] for g in groups]
    for i, p in enumerate(boxes):  # no group drawn over another
        for q in boxes[i + 1:]:
            assert p["x2"] <= q["x1"] or q["x2"] <= p["x1"] or p["y2"] <= q["y1"] or q["y2"] <= p["y1"]
    assert any("current: “spot 119”" in g["label"] for g in groups)
    # every group lies inside the view
    assert b.page.evaluate("""() => { const cy = window.pmemGraph.cy; const e = cy.extent();
        const bb = cy.elements().boundingBox();
        return bb.x1 >= e.x1 - 1 && bb.x2 <= e.x2 + 1 && bb.y1 >= e.y1 - 1 && bb.y2 <= e.y2 + 1; }""")
    b.shot(f"graph-summary-{width}")
    # a group opens its versions at a readable size
    g = groups[0]
    box = b.page.locator("#graph").bounding_box()
    b.page.mouse.click(box["x"] + (g["box"]["x1"] + g["box"]["x2"]) / 2,
                       box["y"] + (g["box"]["y1"] + g["box"]["y2"]) / 2)
    b.page.wait_for_selector("#graph[data-mode='detail']")
    lo, hi = _shown(b)
    assert g["first"] <= (lo + hi) // 2 <= g["last"]
    assert b.page.evaluate("() => window.pmemGraph.cy.zoom() * 12") >= 10.99


def test_a_jump_keeps_the_versions_evidence_in_view(
        browsing: Browsing, width: str, ns: Any, make_user: Any) -> None:
    b = browsing
    b.login(make_user("viewer", ns))
    for i in range(30):
        observe(ns, "desk", f"room {i}")
    v3 = Version.objects.get(cell__namespace=ns, cell__key="desk", ordinal=3)
    _open(b, ns, "desk")
    b.page.fill("#jump-to", "v3")
    b.page.press("#jump-to", "Enter")
    b.page.wait_for_function("(id) => document.getElementById('graph').dataset.selected === id",
                             arg=f"v{v3.pk}")
    inside = b.page.evaluate(f"""() => {{ const cy = window.pmemGraph.cy; const e = cy.extent();
        const v = cy.getElementById('v{v3.pk}');
        const shown = v.union(v.outgoers('node.evidence')).union(v.incomers('node.operation'));
        return [shown.length, shown.every((n) => {{ const b = n.boundingBox();
            return b.x1 >= e.x1 && b.x2 <= e.x2 && b.y1 >= e.y1 && b.y2 <= e.y2; }})]; }}""")
    assert inside == [3, True]


def test_the_timeline_is_finger_wide_on_a_phone_and_its_labels_never_overlap(
        browsing: Browsing, width: str, ns: Any, make_user: Any) -> None:
    b = browsing
    b.login(make_user("viewer", ns))
    for i in range(6):
        accept(ns, "robot", 5, start=5 * i)
        b.page.wait_for_timeout(400)  # commits spread over a few seconds: several ticks
    _open(b, ns, "robot")
    b.page.wait_for_selector("#timeline[data-drawn='1']")
    ticks = b.page.evaluate("""() => [...document.querySelectorAll('#timeline .tl-tick')]
        .map((t) => { const r = t.getBoundingClientRect(); return [r.left, r.right, t.textContent]; })""")
    assert len(ticks) >= 2, ticks
    expect(b.page.locator("#timeline .timeline-day")).to_have_text(re.compile(r"^\d{4}-\d{2}-\d{2} \(UTC\)$"))
    for (_, right, _), (left, _, _) in zip(ticks, ticks[1:], strict=False):
        assert left >= right, ticks
    if width == "phone":
        bars = b.page.evaluate("""() => [...document.querySelectorAll('#timeline .tl-bucket')]
            .map((x) => { const r = x.getBoundingClientRect(); return [r.width, r.height]; })""")
        assert bars and all(w >= 44 and h >= 44 for w, h in bars), bars
        small = b.page.evaluate("""() => [...document.querySelectorAll(
            '#graph-older, #graph-newer, .graph-bar button, a.vlink')].filter((el) => {
              const r = el.getBoundingClientRect(); return r.width && r.height < 43.5; })
            .map((el) => el.outerHTML.slice(0, 60))""")
        assert small == []


def test_every_time_reads_in_one_shape(browsing: Browsing, width: str, ns: Any,
                                       make_user: Any) -> None:
    b = browsing
    b.login(make_user("reviewer", ns))
    observe(ns, "city", "Paris")
    observe(ns, "city", "Berlin")
    shape = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}(:\d{2})? [A-Z][\w+:-]*$")
    for path in (f"/ns/{ns.name}/cells/city/", f"/ns/{ns.name}/operations/",
                 f"/ns/{ns.name}/cells/city/diff/"):
        b.goto(path)
        b.page.wait_for_load_state("networkidle")
        times = b.page.evaluate("() => [...document.querySelectorAll('time')].map((t) => t.textContent.trim())")
        assert times and all(shape.match(t) for t in times), times
        text = b.page.evaluate("() => document.body.innerText")
        for internal in ("UTC UTC", "SPEC", "as the paper", "compensated"):
            assert internal not in text, (path, internal)


def test_compare_finds_any_version_and_shows_current_against_challenger(
        browsing: Browsing, width: str, ns: Any, make_user: Any) -> None:
    b = browsing
    b.login(make_user("reviewer", ns))
    accept(ns, "pos", 210)
    observe(ns, "day", "Tuesday at 10")
    observe(ns, "day", "Thursday at 10", op="contest", source="calendar")
    b.goto(f"/ns/{ns.name}/review/")
    b.page.locator("fieldset[data-key='day']").get_by_test_id("compare-candidates").click()
    sides = b.page.locator(".diff-side h2")
    expect(sides.first).to_contain_text("Current value · v1")
    expect(sides.nth(1)).to_contain_text("Challenger · v2")
    expect(b.page.get_by_test_id("contest-note")).to_be_visible()
    expect(b.page.locator(".diff del")).to_have_count(0)
    expect(b.page.locator(".diff")).not_to_contain_text("“”")
    expect(b.page.locator(".diff")).not_to_contain_text("Older")
    expect(b.page.locator("main")).not_to_contain_text("{#")
    # a picker finds a version by its vN or its words, far beyond any menu of the newest
    b.goto(f"/ns/{ns.name}/cells/pos/diff/")
    picker = b.page.locator("#diff-a-v")
    picker.fill("spot 3")
    expect(b.page.locator("#diff-a-list option[value='v4']")).to_have_count(1)
    picker.fill("v4")
    b.page.get_by_role("button", name="Compare").click()
    expect(b.page.locator(".diff-side h2").first).to_contain_text("Earlier · v4")
    expect(b.page.get_by_test_id("diff-value").first).to_have_text("spot 3")
    assert b.page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth + 1")
    b.shot(f"compare-picker-{width}")


def test_the_changed_pages_pass_axe(axe_context: Any, live_server: Any,  # noqa: F811
                                    ns: Any, make_user: Any) -> None:
    from tests.explorer.test_polish_browser import _login
    accept(ns, "robot", 60)
    observe(ns, "day", "Tuesday")
    observe(ns, "day", "Thursday", op="contest")
    page = axe_context.new_page()
    _login(page, live_server.url, make_user("viewer", ns))
    for viewport in VIEWPORTS.values():
        page.set_viewport_size(viewport)
        page.goto(live_server.url + f"/ns/{ns.name}/cells/robot/")
        page.wait_for_function("() => window.pmemGraph && window.pmemGraph.renders >= 1")
        page.wait_for_selector("#timeline[data-drawn='1']")
        page.click("#graph-fit")
        page.wait_for_selector("#graph[data-mode='summary']")
        assert axe_violations(page) == []
        page.goto(live_server.url + f"/ns/{ns.name}/cells/day/diff/")
        assert axe_violations(page) == []
