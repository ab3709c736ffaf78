"""The generic pages and reads without a browser: status pages rendered by Django with
DEBUG off, the glossary, the frontier's bounded queries, the read comparison's marks."""

from __future__ import annotations

import re
from typing import Any

import pytest

from memory.models import Evidence
from memory.selectors.frontier import frontier_page
from memory.selectors.observations import evidence_effects
from memory.services import operation_apply
from tests.explorer.test_views import client_for

pytestmark = pytest.mark.django_db


def test_404_and_403_are_the_explorers_own_pages(demo_ns: Any, make_user: Any,
                                                 settings: Any) -> None:
    settings.DEBUG = False
    client = client_for(make_user("viewer", demo_ns))
    missing = client.get(f"/ns/{demo_ns.name}/cells/no_such_key/")
    assert missing.status_code == 404
    body = missing.content.decode()
    assert "Nothing here" in body and 'class="topbar"' in body and "/glossary/" in body
    denied = client.get(f"/ns/{demo_ns.name}/access/")
    assert denied.status_code == 403
    assert "You may not do that here" in denied.content.decode()
    # htmx asking for what it may not have gets a line, not a page (no forms, no header).
    fragment = client.get(f"/ns/{demo_ns.name}/cells/alice_home_city/panel/?part=actions",
                          HTTP_HX_REQUEST="true")
    assert fragment.status_code == 403
    assert fragment.content.decode().startswith('<p class="flash error" role="alert">Not allowed')
    # Another namespace's pages answer the same 404 as a missing one.
    other = client.get("/ns/not-a-member-of-this/")
    assert other.status_code == 404 and "Nothing here" in other.content.decode()


def test_glossary_is_open_and_defines_the_words(client: Any) -> None:
    body = client.get("/glossary/").content.decode()
    for term in ("frontier", "support", "contested", "contradicted", "revoked", "tombstone",
                 "superseded", "alternative", "restore"):
        assert f'id="{term}"' in body, term
    assert 'href="/api/docs/"' in body


def test_the_frontier_page_costs_the_same_queries_for_30_rows_as_for_3(
        ns: Any, make_user: Any, django_assert_max_num_queries: Any) -> None:
    for i in range(40):
        operation_apply(namespace=ns, key=f"item_{i:02d}_colour", op="accept", value=f"red {i}",
                        actor="api:test", explicit=True)
        operation_apply(namespace=ns, key=f"item_{i:02d}_colour", op="accept", value=f"blue {i}",
                        actor="api:test", explicit=True)
    # one per search word (its earlier values), count, page, last changes, past matches
    with django_assert_max_num_queries(6):
        page = frontier_page(namespace=ns, search="item red", sort="-changed")
    assert page.total == 40 and len(page.rows) == 30
    assert all(r.past_match and r.past_match.startswith("red") for r in page.rows)
    client = client_for(make_user("viewer", ns))
    with django_assert_max_num_queries(16):
        body = client.get(f"/ns/{ns.name}/", {"q": "item red", "page": "2"}).content.decode()
    assert "31–40 of 40 cells" in body


def test_raw_read_lines_carry_what_their_observation_stands_for_now(demo_ns: Any) -> None:
    texts = dict(Evidence.objects.filter(namespace=demo_ns).values_list("text", "id"))
    moved = next(i for t, i in texts.items() if "cabinet 3" in t and t.startswith("Update"))
    in_error = next(i for t, i in texts.items() if "reported in error" in t)
    effects = evidence_effects([moved, in_error])
    assert {"key": "mug_1_location", "mark": "retracted"} in effects[moved]
    assert {"key": "mug_1_location", "mark": "retraction"} in effects[in_error]


def test_compare_reads_says_which_mode_agents_use_and_what_needs_a_model(
        demo_ns: Any, make_user: Any) -> None:
    client = client_for(make_user("viewer", demo_ns))
    body = client.get(f"/ns/{demo_ns.name}/read/", {"q": "where is mug 1"}).content.decode()
    assert body.count("agents use this") == 1
    assert "Needs a language model" in body
    assert f"/ns/{demo_ns.name}/cells/mug_1_location/" in body
    assert 'class="badge badge-retracted"' in body


def test_a_contested_row_shows_the_competing_values(demo_ns: Any, make_user: Any) -> None:
    from memory.selectors.cells import cell_detail

    detail = cell_detail(namespace=demo_ns, key="team_meeting_day")
    assert detail.alternatives
    body = client_for(make_user("viewer", demo_ns)).get(
        f"/ns/{demo_ns.name}/", {"show": "contested"}).content.decode()
    assert "against:" in body
    for alternative in detail.alternatives:
        assert f'<span class="alt-value">{alternative["value"]}</span>' in body


def test_times_carry_year_and_zone_without_javascript(demo_ns: Any, make_user: Any) -> None:
    from django.utils import timezone

    client = client_for(make_user("viewer", demo_ns))
    body = client.get(f"/ns/{demo_ns.name}/").content.decode()
    year = str(timezone.now().year)
    assert re.search(rf'<time datetime="{year}-\d\d-\d\dT[\d:]+Z" title="{year}-[\d\- :]+ UTC" '
                     rf'data-local>{year}-\d\d-\d\d \d\d:\d\d UTC</time>', body)


def test_pages_go_on_past_the_counting_cap(ns: Any, make_user: Any, monkeypatch: Any) -> None:
    import memory.selectors.frontier as selectors

    monkeypatch.setattr(selectors, "COUNT_CAP", 40)  # 65 cells, counted up to 40
    for i in range(65):
        operation_apply(namespace=ns, key=f"k{i:03d}", op="accept", value=str(i),
                        actor="api:test", explicit=True)
    page = frontier_page(namespace=ns, page=3)
    assert (page.total, page.total_capped, page.first, page.last) == (40, True, 61, 65)
    assert [r.key for r in page.rows] == [f"k{i:03d}" for i in range(60, 65)]
    assert not page.has_next and frontier_page(namespace=ns, page=2).has_next
    body = client_for(make_user("viewer", ns)).get(f"/ns/{ns.name}/", {"page": "2"}).content
    assert "31–60 of 40+ cells" in body.decode() and "page=3" in body.decode()


def test_a_common_word_in_earlier_values_is_still_found(demo_ns: Any, monkeypatch: Any) -> None:
    import memory.selectors.frontier as selectors
    from memory.selectors.cells import cell_detail

    detail = cell_detail(namespace=demo_ns, key="alice_home_city")
    past = next(h["value"] for h in detail.history if h["value"] != detail.value)
    for limit in (selectors.PAST_IDS_MAX, 0):  # ids, then the per-cell EXISTS
        monkeypatch.setattr(selectors, "PAST_IDS_MAX", limit)
        page = frontier_page(namespace=demo_ns, search=past)
        assert [r.key for r in page.rows] == ["alice_home_city"], limit
        assert page.rows[0].past_match == past
