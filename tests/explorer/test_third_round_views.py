"""The reviewer's workbench, third round, through Django's test client on PostgreSQL: undo and
restore without apparent copies and without losing evidence, every action's outcome told before
it is confirmed, one numbering (vN) in the pages and the downloads, every closure of a contest
listed, plain feedback, and the log's audit filters."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from memory.models import Operation, Version
from memory.services import (
    observation_ingest,
    operation_apply,
    operation_undo,
    token_create,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def reviewer(client, ns, make_user):
    user = make_user("reviewer", ns)
    client.force_login(user)
    return user


def observe(ns, key, value, op="accept", source="chat"):
    observation_ingest(namespace=ns, text=f"{key} is {value}", source=source, actor="api:agent",
                       facts=[{"key": key, "value": value, "op": op}])


def person(ns, key, kind, value=None, version=None, actor="user:rev"):
    return operation_apply(namespace=ns, key=key, op=kind, value=value, version_id=version,
                           actor=actor, explicit=True, reason="checked").operation


def page(client, ns, key):
    r = client.get(f"/ns/{ns.name}/cells/{key}/")
    assert r.status_code == 200
    return r.content.decode()


def body(response) -> str:
    return b"".join(response.streaming_content).decode()


def retract_undo_twice(ns, key="alice_home_city"):
    observe(ns, key, "Paris")
    observe(ns, key, "Atlantis")
    for _ in range(2):
        revoke = person(ns, key, "revoke")
        operation_undo(namespace=ns, operation_id=revoke.pk, actor="user:rev")


# --- 1. undo and restore: no apparent copies, no evidence lost --------------------------------


def test_repeated_undo_shows_one_value_restore_of_the_original_and_folds_the_copies(
        client, ns, reviewer):
    retract_undo_twice(ns)
    html = page(client, ns, "alice_home_city")
    atlantis = list(Version.objects.filter(cell__namespace=ns, value="Atlantis").order_by("id"))
    original, copy, head = atlantis
    assert head.status == "active"
    row = re.search(rf'<tr id="v{head.ordinal}".*?</tr>', html, re.S).group(0)
    assert f"restore of v{original.ordinal}" in row
    assert "1 earlier copy" in row
    copy_row = re.search(rf'<tr id="v{copy.ordinal}"[^>]*>', html).group(0)
    assert "hidden" in copy_row and "folded" in copy_row
    first_row = re.search(rf'<tr id="v{original.ordinal}".*?</tr>', html, re.S).group(0)
    assert f"restored as v{head.ordinal}" in first_row
    # the head holds Atlantis: nothing of that value is offered for restore, no copy either
    assert 'data-testid="restore-' not in html.split('id="restore-actions"')[1].split("</section>")[0]


def test_the_restore_list_offers_each_distinct_value_once(client, ns, reviewer):
    retract_undo_twice(ns)
    observe(ns, "alice_home_city", "Lisbon")
    html = page(client, ns, "alice_home_city")
    restore = html.split('id="restore-actions"')[1].split("</section>")[0]
    assert restore.count("<li data-version=") == 1  # two retracted Atlantis copies, one entry
    assert "Restore v" in restore and "the same value as" in restore


def test_undoing_a_resolution_shows_the_alternatives_with_their_own_evidence(
        client, ns, reviewer):
    observe(ns, "carol_drink", "tea")
    observe(ns, "carol_drink", "coffee", op="contest", source="calendar")
    resolve = person(ns, "carol_drink", "resolve", "coffee")
    r = client.post(f"/ns/{ns.name}/operations/{resolve.pk}/undo/", HTTP_HX_REQUEST="true")
    text = r.content.decode()
    assert "“tea” is back in the contest" in text and "with its own evidence" in text
    assert "compensated" not in text and "operation " not in text.split("Undone")[1][:80]
    queue = client.get(f"/ns/{ns.name}/review/").content.decode()
    card = queue.split('data-key="carol_drink"')[1].split("</fieldset>")[0]
    assert "no observation behind it" not in card
    assert "carol_drink is tea" in card


def test_an_undo_says_restore_of_the_original(client, ns, reviewer):
    observe(ns, "k", "Paris")
    observe(ns, "k", "Atlantis")
    revoke = person(ns, "k", "revoke")
    r = client.post(f"/ns/{ns.name}/operations/{revoke.pk}/undo/", HTTP_HX_REQUEST="true")
    original = Version.objects.get(cell__namespace=ns, value="Atlantis", status="revoked")
    assert (f"Undone: “Atlantis” is the current value again (v3, restore of v{original.ordinal}"
            in r.content.decode())


# --- 2. every action says its real outcome before it is confirmed -----------------------------


def test_a_reject_that_will_empty_the_key_says_so_before_it_is_sent(client, ns, reviewer):
    observe(ns, "carol_drink", "tea")
    observe(ns, "carol_drink", "coffee", op="contest")
    person(ns, "carol_drink", "resolve", "coffee")
    html = page(client, ns, "carol_drink")
    assert "the predecessor is reinstated" not in html
    outcome = re.search(r'data-testid="reject-outcome">(.*?)</p>', html, re.S).group(1)
    assert "EMPTY" in outcome
    before = Operation.objects.count()
    r = client.get(f"/ns/{ns.name}/cells/carol_drink/operations/preview/?op=reject")
    assert r.status_code == 200 and "carol_drink will be EMPTY" in r.content.decode()
    assert Operation.objects.count() == before  # the preview writes nothing
    assert Version.objects.get(cell__namespace=ns, value="coffee").status == "active"


def test_the_outcome_names_the_value_the_action_leaves(client, ns, reviewer):
    observe(ns, "city", "Paris")
    observe(ns, "city", "Berlin")
    base = f"/ns/{ns.name}/cells/city/operations/preview/"
    assert "current value will be “Paris” (v1)" in client.get(f"{base}?op=revoke").content.decode()
    assert "“Rome” (a new version)" in client.get(f"{base}?op=accept&value=Rome").content.decode()
    contested = client.get(f"{base}?op=contest&value=Rome").content.decode()
    assert "stays “Berlin” (v2), contested by “Rome”" in contested
    refused = client.get(f"{base}?op=resolve").content.decode()
    assert refused.startswith("This will be refused")
    assert client.get(f"{base}?op=erase").status_code == 400
    assert client.get(f"{base}?op=revoke&version=x").status_code == 400


def test_a_viewer_gets_no_preview(client, ns, make_user):
    observe(ns, "city", "Paris")
    client.force_login(make_user("viewer", ns))
    assert client.get(f"/ns/{ns.name}/cells/city/operations/preview/?op=reject").status_code == 403


# --- 3. one numbering in the downloads ---------------------------------------------------------


def test_the_history_download_names_versions_vn_with_their_reasons(client, ns, reviewer):
    observe(ns, "city", "Paris")
    observe(ns, "city", "Berlin")
    person(ns, "city", "revoke")
    rows = list(csv.DictReader(io.StringIO(body(client.get(f"/ns/{ns.name}/cells/city/export.csv")))))
    berlin = next(r for r in rows if r["value"] == "Berlin")
    v = Version.objects.get(cell__namespace=ns, value="Berlin")
    assert berlin["version"] == "v2" and berlin["ordinal"] == "2"
    assert berlin["version_id"] == str(v.pk) and berlin["supersedes"] == "v1"
    assert berlin["retracted_by"] == "user:rev" and berlin["retraction_reason"] == "checked"
    data = json.loads(body(client.get(f"/ns/{ns.name}/cells/city/export.json")))
    assert {d["version"] for d in data} == {"v1", "v2"}


def test_the_frontier_download_names_the_head_vn(client, ns, reviewer):
    observe(ns, "city", "Paris")
    person(ns, "city", "accept", "Rome")
    rows = list(csv.DictReader(io.StringIO(body(client.get(f"/ns/{ns.name}/export/frontier.csv")))))
    assert rows[0]["version"] == "v2" and rows[0]["ordinal"] == "2"
    assert rows[0]["reason"] == "checked" and rows[0]["actor"] == "user:rev"
    rome = Version.objects.get(cell__namespace=ns, value="Rome")
    assert rows[0]["version_id"] == str(rome.pk)


# --- 4. the queue lists every closure not made by a reviewer, and follows live ----------------


def test_an_agents_resolve_is_listed_under_closed_by_later_writes(client, ns, reviewer):
    client.get(f"/ns/{ns.name}/review/")  # the reviewer looked
    for key in ("gina_phone", "dan_desk"):
        observe(ns, key, "a")
        observe(ns, key, "b", op="contest")
        person(ns, key, "resolve", "b", actor="api:planner")
    html = client.get(f"/ns/{ns.name}/review/").content.decode()
    closed = html.split('data-testid="closed-list"')[1].split("</ul>")[0]
    assert "gina_phone" in closed and "dan_desk" in closed
    assert "api:planner" in closed and 'data-testid="closed-how"' in closed
    assert 'id="review-live"' in html and "data-refresh-when-idle" in html


def test_the_live_refresh_keeps_the_closures_since_the_page_was_drawn(client, ns, reviewer):
    client.get(f"/ns/{ns.name}/review/")
    observe(ns, "gina_phone", "a")
    observe(ns, "gina_phone", "b", op="contest")
    person(ns, "gina_phone", "resolve", "b", actor="api:planner")
    html = client.get(f"/ns/{ns.name}/review/").content.decode()
    after = re.search(r"live=1&amp;after=(\d+)", html).group(1)
    for _ in range(2):  # the page's refreshes do not move "since you last looked"
        live = client.get(f"/ns/{ns.name}/review/?live=1&after={after}").content.decode()
        assert "gina_phone" in live.split('data-testid="closed-list"')[1]


# --- 7. plain feedback --------------------------------------------------------------------------


def test_an_undone_row_is_marked_in_the_log_and_offers_no_second_undo(client, ns, reviewer):
    observe(ns, "k", "a")
    accept = person(ns, "k", "accept", "b")
    operation_undo(namespace=ns, operation_id=accept.pk, actor="user:rev")
    html = client.get(f"/ns/{ns.name}/operations/").content.decode()
    assert f'data-testid="undone-{accept.pk}"' in html
    assert f'data-testid="log-undo-{accept.pk}"' not in html
    before = Operation.objects.count()
    r = client.post(f"/ns/{ns.name}/operations/{accept.pk}/undo/", HTTP_HX_REQUEST="true")
    assert "undone already" in r.content.decode()
    assert Operation.objects.count() == before


def test_no_internal_reference_and_one_date_format(client, ns, reviewer):
    retract_undo_twice(ns)
    observe(ns, "c", "a")
    observe(ns, "c", "b", op="contest")
    person(ns, "c", "resolve", "b", actor="api:planner")
    for path in ("cells/alice_home_city/", "review/", "operations/", ""):
        html = client.get(f"/ns/{ns.name}/{path}").content.decode()
        text = re.sub(r"<!--.*?-->", "", html, flags=re.S)
        assert "SPEC" not in text and "§" not in text and "the paper" not in text, path
        assert "UTC UTC" not in text and "</time> UTC" not in text, path
    v = Version.objects.filter(cell__key="alice_home_city").first()
    part = client.get(f"/ns/{ns.name}/cells/alice_home_city/versions/{v.pk}/").content.decode()
    assert "</time> UTC" not in part


# --- 8. audit: the log filters by time and token, and exports what it shows ------------------


def test_the_log_filters_by_time_range_and_token_and_exports_what_it_shows(
        client, ns, reviewer):
    token = token_create(namespace=ns, name="planner")
    person(ns, "k", "accept", "a", actor="api:planner")
    person(ns, "k", "accept", "b", actor="user:rev")
    old = person(ns, "k", "accept", "c", actor="api:planner")
    Operation.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=3))
    today = timezone.now().date().isoformat()
    for who in ("planner", token.prefix[:6]):
        html = client.get(f"/ns/{ns.name}/operations/?token={who}&since={today}").content.decode()
        assert html.count('data-testid="actor"') == 1, who
    query = f"token=planner&since={today}&until={today}"
    html = client.get(f"/ns/{ns.name}/operations/?{query}").content.decode()
    assert f"export.csv?{query.replace('&', '&amp;')}" in html
    rows = list(csv.DictReader(io.StringIO(body(
        client.get(f"/ns/{ns.name}/operations/export.csv?{query}")))))
    assert [(r["actor"], r["value"]) for r in rows] == [("api:planner", "a")]
    assert rows[0]["version"] == "v1"
    bad = client.get(f"/ns/{ns.name}/operations/?since=yesterday").content.decode()
    assert "since" in bad and "Filter not applied" in bad


# --- 6. text that cannot break a layout -------------------------------------------------------


def test_a_value_column_wraps_anywhere(client):
    from django.contrib.staticfiles import finders
    css = open(finders.find("explorer/explorer.css")).read()
    assert "overflow-wrap: anywhere" in css and ".grid .value { max-width:" in css


# --- 5. compare: current against challenger, any version by vN --------------------------------


def test_compare_from_the_queue_labels_current_and_competing_without_a_strike(
        client, ns, reviewer):
    observation_ingest(namespace=ns, source="chat", actor="api:agent",
                       facts=[{"key": "day", "value": "Tuesday at 10", "op": "accept"}])
    observation_ingest(namespace=ns, source="cal", actor="api:agent",
                       facts=[{"key": "day", "value": "Thursday at 10", "op": "contest"}])
    queue = client.get(f"/ns/{ns.name}/review/").content.decode()
    link = re.search(r'href="([^"]*/diff/\?[^"]*)" data-testid="compare-candidates"', queue)
    page = client.get(link.group(1).replace("&amp;", "&")).content.decode()
    assert "Older" not in page and "Newer" not in page
    assert page.index("Current value ·") < page.index("Challenger ·")
    assert "<del>" not in page and '<mark class="differs">Thursday</mark>' in page
    assert "“”" not in page


def test_compare_reaches_any_version_by_its_vn_or_its_words(client, ns, reviewer):
    for i in range(205):
        person(ns, "pos", "accept", f"spot {i}")
    page = client.get(f"/ns/{ns.name}/cells/pos/diff/?a_v=v2&b_v=v205").content.decode()
    assert "spot 1" in page and "spot 204" in page
    assert 'id="diff-a-v" name="a_v"' in page and 'value="v2"' in page
    assert "Earlier · " in page and "Current value · " in page
    # the picker suggests by vN or by words, whatever the length of the history
    options = client.get(f"/ns/{ns.name}/cells/pos/diff/versions/?a_v=v3").content.decode()
    assert options.strip() == '<option value="v3">spot 2 (superseded)</option>'
    options = client.get(f"/ns/{ns.name}/cells/pos/diff/versions/?b_v=spot+7").content.decode()
    assert '<option value="v8">spot 7 (superseded)</option>' in options
    # words typed into a picker name the newest version that holds them
    page = client.get(f"/ns/{ns.name}/cells/pos/diff/?a_v=spot+107&b_v=v205").content.decode()
    assert re.search(r'Earlier · <a [^>]*>v108</a>', page)
    missing = client.get(f"/ns/{ns.name}/cells/pos/diff/?a_v=nowhere&b_v=v205")
    assert missing.status_code == 404 and "matches “nowhere”" in missing.content.decode()
