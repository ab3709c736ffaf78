"""The reviewer's workbench in Debian's Chromium: undo and restore on the cell
page, the review queue (desktop and phone width), the readable log's filters and paging, the
version diff, exports, and an observation that yielded no fact. Screenshots land in
tests/artifacts/ (and, with PMEM_DOC_SHOTS=1, in docs/screenshots/ for the README's tour)."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from memory.models import Operation, Version
from memory.selectors.cells import cell_detail
from memory.services import observation_ingest, operation_apply
from tests.explorer.conftest import ARTIFACTS, Browsing

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
DOCS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def _shot(b: Browsing, name: str) -> None:
    """A screenshot mid-test: ``caret="initial"``, because Playwright hides the caret by
    putting a style attribute on every input, which htmx's settle then copies back in the
    next swap (a CSP style-src-attr violation that is the screenshot's, not the page's)."""
    # docs/screenshots/ (the README's tour) only when asked: PMEM_DOC_SHOTS=1 make test.
    for folder in (ARTIFACTS, DOCS) if os.environ.get("PMEM_DOC_SHOTS") else (ARTIFACTS,):
        folder.mkdir(parents=True, exist_ok=True)
        b.page.screenshot(path=str(folder / f"{name}.png"), full_page=True, caret="initial")


def _act(b: Browsing, op: str, reason: str, **fields: str) -> None:
    action = b.page.locator(f"details.action[data-op='{op}']")
    if action.get_attribute("open") is None:
        action.locator("summary").click()
    for name, value in fields.items():
        action.locator(f"[name='{name}']").fill(value)
    action.locator("[name='reason']").fill(reason)
    action.locator("button[type=submit]").click()


def _no_horizontal_scroll(b: Browsing) -> None:
    assert b.page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth + 1")


def test_undo_after_a_retraction_and_restore_of_a_revoked_version(
        browsing: Browsing, demo_ns: Any, make_user: Any) -> None:
    b = browsing
    user = make_user("reviewer", demo_ns)
    b.login(user)
    b.goto(f"/ns/{demo_ns.name}/cells/alice_home_city/")
    expect(b.page.get_by_test_id("current-value")).to_have_text("Lisbon")
    _act(b, "revoke", "reported by mistake")
    expect(b.page.get_by_test_id("current-value")).to_have_text("Berlin")
    undo = b.page.get_by_test_id("undo")
    expect(undo).to_have_text("Undo: restore the retracted version")
    _shot(b, "cell-undo-offer")
    undo.click()
    expect(b.page.get_by_test_id("current-value")).to_have_text("Lisbon")
    expect(b.page.locator(".flash.ok")).to_contain_text("Undone")
    restore = Operation.objects.filter(namespace=demo_ns, type="restore").get()
    assert restore.actor == f"user:{user.username}" and restore.method == "explicit"
    # the revoked Lisbon stays, and has a Restore button of its own; retract the restored
    # value through its own undo, then restore the revoked one with a reason
    b.page.get_by_test_id("undo").click()
    expect(b.page.get_by_test_id("current-value")).to_have_text("Berlin")
    revoked = Version.objects.filter(cell__namespace=demo_ns, value="Lisbon",
                                     status="revoked").order_by("id").first()
    item = b.page.locator(f"#restore-actions li[data-version='{revoked.pk}']")
    item.locator("[name='reason']").fill("Lisbon was right after all")
    item.get_by_test_id(f"restore-{revoked.pk}").click()
    expect(b.page.get_by_test_id("current-value")).to_have_text("Lisbon")
    assert cell_detail(namespace=demo_ns, key="alice_home_city").value == "Lisbon"
    _shot(b, "cell-restore")
    assert b.errors == []


def test_a_refused_resolve_keeps_the_reason_and_says_who_closed_the_contest(
        browsing: Browsing, demo_ns: Any, make_user: Any) -> None:
    b = browsing
    b.login(make_user("reviewer", demo_ns))
    b.goto(f"/ns/{demo_ns.name}/cells/team_meeting_day/")
    action = b.page.locator("details.action[data-op='resolve']")
    action.get_by_label("Thursday", exact=False).check()
    # meanwhile an agent settles the key by a plain accept (SPEC §3 allows it)
    operation_apply(namespace=demo_ns, key="team_meeting_day", op="accept", value="Friday",
                    actor="api:calendar-bot")
    _act(b, "resolve", "the calendar is authoritative")
    expect(b.page.locator(".flash.error")).to_contain_text("resolve needs a contested cell")
    changes = b.page.get_by_test_id("changes")
    expect(changes).to_contain_text("api:calendar-bot")
    expect(changes).to_contain_text("Friday")
    expect(b.page.get_by_test_id("kept-reason")).to_contain_text("the calendar is authoritative")
    expect(b.page.get_by_test_id("current-value")).to_have_text("Friday")
    expect(b.page.locator("details.action[data-op='resolve']")).to_have_count(0)  # no stale choices
    _shot(b, "cell-refused-what-changed")
    assert b.errors == []


@pytest.mark.parametrize("viewport", ["desktop", "phone"])
def test_the_review_queue_resolves_several_contests_each_with_its_reason(
        browsing: Browsing, make_namespace: Any, make_user: Any, viewport: str) -> None:
    ns = make_namespace("queue")
    for key, (head, alt) in {"desk_1": ("north", "south"), "desk_2": ("east", "west"),
                             "desk_3": ("up", "down")}.items():
        observation_ingest(namespace=ns, facts=[{"key": key, "value": head}], source="crm-sync",
                           actor="api:crm")
        observation_ingest(namespace=ns, facts=[{"key": key, "value": alt, "op": "contest"}],
                           source="agent:planner", actor="api:planner")
    operation_apply(namespace=ns, key="desk_3", op="accept", value="sideways",
                    actor="api:planner")  # closes desk_3's contest before anyone looked
    b = browsing
    if viewport == "phone":
        b.page.set_viewport_size(PHONE)
    b.login(make_user("reviewer", ns))
    b.goto(f"/ns/{ns.name}/review/")
    contests = b.page.get_by_test_id("contest")
    expect(contests).to_have_count(2)
    expect(contests.first).to_contain_text("north")
    expect(contests.first).to_contain_text("south")
    expect(contests.first).to_contain_text("agent:planner")
    closed = b.page.get_by_test_id("closed-list")
    expect(closed).to_contain_text("desk_3")
    expect(closed).to_contain_text("api:planner")
    if viewport == "phone":
        _no_horizontal_scroll(b)
    _shot(b, f"review-queue-{viewport}")
    first, second = contests.nth(0), contests.nth(1)
    expect(first.get_by_role("radio").first).not_to_be_checked()  # no pre-selected winner
    first.get_by_label("south").check()
    first.locator("input[name^='reason']").fill("south per the floor plan")
    first.locator("input[name='pick']").check()
    second.get_by_label("east").check()
    second.locator("input[name^='reason']").fill("east confirmed")
    second.locator("input[name='pick']").check()
    b.page.get_by_test_id("resolve-selected").click()
    expect(b.page.get_by_test_id("resolved")).to_have_count(2)
    expect(b.page.get_by_test_id("queue-empty")).to_be_visible()
    assert cell_detail(namespace=ns, key="desk_1").value == "south"
    assert cell_detail(namespace=ns, key="desk_2").value == "east"
    reasons = set(Operation.objects.filter(namespace=ns, type="resolve")
                  .values_list("reason", flat=True))
    assert reasons == {"south per the floor plan", "east confirmed"}
    # Undo from the queue reopens a contest
    b.page.get_by_test_id("resolved").first.get_by_test_id("undo").click()
    expect(b.page.get_by_test_id("contest")).to_have_count(1)
    assert b.errors == []


def test_a_refused_resolve_in_the_queue_keeps_the_reason(
        browsing: Browsing, make_namespace: Any, make_user: Any) -> None:
    ns = make_namespace("queue")
    operation_apply(namespace=ns, key="k", op="accept", value="a", actor="api:x")
    operation_apply(namespace=ns, key="k", op="contest", value="b", actor="api:x")
    b = browsing
    b.login(make_user("reviewer", ns))
    b.goto(f"/ns/{ns.name}/review/")
    contest = b.page.get_by_test_id("contest")
    contest.get_by_label("b").check()
    contest.locator("input[name^='reason']").fill("b is right")
    operation_apply(namespace=ns, key="k", op="accept", value="c", actor="api:crm")
    contest.get_by_test_id("resolve-one").click()
    refused = b.page.get_by_test_id("refused")
    expect(refused).to_contain_text("resolve needs a contested cell")
    expect(refused).to_contain_text("api:crm")
    expect(b.page.get_by_test_id("queue-empty")).to_be_visible()
    _shot(b, "review-queue-refused")
    b.expect_console_error("status of 409")  # the refused resolve's page answers 409


@pytest.mark.parametrize("viewport", ["desktop", "phone"])
def test_the_log_filters_by_source_and_op_and_pages_with_position(
        browsing: Browsing, make_namespace: Any, make_user: Any, viewport: str) -> None:
    ns = make_namespace("log")
    observation_ingest(namespace=ns, text="alice_home_city = Paris", source="crm-sync",
                       actor="api:crm")
    observation_ingest(namespace=ns, facts=[{"key": f"k{i}", "value": f"v{i}"} for i in range(60)],
                       source="agent:planner", actor="api:planner")
    operation_apply(namespace=ns, key="alice_home_city", op="revoke", actor="user:rev",
                    reason="typo", explicit=True)
    b = browsing
    if viewport == "phone":
        b.page.set_viewport_size(PHONE)
    b.login(make_user("viewer", ns))
    b.goto(f"/ns/{ns.name}/operations/")
    expect(b.page.get_by_test_id("log-position")).to_have_text("Operations 1–50 of 62")
    b.page.get_by_test_id("older").click()
    expect(b.page.get_by_test_id("log-position")).to_have_text("Operations 51–62 of 62")
    b.page.fill("#log-key-contains", "alice home")
    expect(b.page.get_by_test_id("log-position")).to_have_text("Operations 1–2 of 2")
    b.goto(f"/ns/{ns.name}/operations/")
    b.page.fill("#log-source", "crm-sync")
    expect(b.page.get_by_test_id("log-position")).to_have_text("Operations 1–1 of 1")
    row = b.page.locator("#log-results tbody tr").first
    expect(row).to_contain_text("api:crm")
    expect(row).to_contain_text("the observation states it")  # plain words
    expect(row).to_contain_text("Paris")
    expect(row.get_by_role("link", name="observation #1")).to_be_visible()
    b.page.fill("#log-source", "")
    b.page.select_option("#log-op", "revoke")
    expect(b.page.get_by_test_id("log-position")).to_have_text("Operations 1–1 of 1")
    expect(b.page.locator("#log-results tbody tr").first).to_contain_text("user:rev")
    if viewport == "phone":
        _no_horizontal_scroll(b)  # the rows are cards below 640 px
        _shot(b, "operations-filtered-phone")
    else:
        _shot(b, "operations-filtered")
    with b.page.expect_download() as download:
        b.page.get_by_role("link", name="CSV").click()
    text = Path(download.value.path()).read_text()
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0][0] == "id" and len(rows) == 2 and rows[1][2] == "revoke"
    assert b.errors == []


def test_compare_two_versions_and_an_observation_without_facts(
        browsing: Browsing, demo_ns: Any, make_user: Any) -> None:
    b = browsing
    b.login(make_user("viewer", demo_ns))
    b.goto(f"/ns/{demo_ns.name}/cells/alice_home_city/")
    b.page.get_by_role("link", name="Compare two versions").click()
    diff = b.page.get_by_test_id("diff")
    expect(diff.get_by_test_id("diff-value").nth(1)).to_have_text("Lisbon")
    berlin = Version.objects.get(cell__namespace=demo_ns, cell__key="alice_home_city",
                                 value="Berlin")
    b.page.fill("#diff-a-v", f"v{berlin.ordinal}")
    b.page.get_by_role("button", name="Compare").click()
    expect(diff.get_by_test_id("diff-value").first).to_have_text("Berlin")
    _shot(b, "diff")
    evidence = observation_ingest(namespace=demo_ns, text="Dave told me his new manager is Zed.",
                                  source="chat", actor="user:demo")
    b.goto(f"/ns/{demo_ns.name}/observations/{evidence.pk}/")
    expect(b.page.get_by_test_id("no-fact")).to_contain_text("No fact found")
    b.goto(f"/ns/{demo_ns.name}/operations/")
    expect(b.page.get_by_test_id("no-fact-item").first).to_contain_text("Dave told me")
    assert b.errors == []
