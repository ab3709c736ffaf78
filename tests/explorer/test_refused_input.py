"""The explorer's date fields and query parameters the black-box probe sent, each a 500 once:
now a 400 naming the parameter (CONTRACT, "Input that is refused")."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest
from django.test import Client

from memory.services import operation_apply

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def reviewer(ns: Any, make_user: Any) -> Client:
    operation_apply(namespace=ns, key="k", op="accept", value="a", actor="user:t")
    operation_apply(namespace=ns, key="k", op="accept", value="b", actor="user:t")
    client = Client(raise_request_exception=False)
    client.force_login(make_user("reviewer", ns))
    return client


PROBE = [  # (path and query after /ns/{ns}/, the parameter named)
    ("?as_of=9999-12-31T23:59:59-14:00", "as_of"),  # OverflowError
    ("?as_of=" + quote("2026-12-01T10:00:00+16:00"), "as_of"),
    ("?at=0001-01-01T00:10&tz=Asia/Tokyo", "at"),  # OverflowError
    ("?at=2026-12-01T10:00&tz=Nope/Zone", "tz"),
    ("?at=2026-12-01T10:00&tz=" + quote("../../etc/passwd"), "tz"),
    ("cells/k/?as_of=9999-12-31T23:59:59-14:00", "as_of"),
    ("cells/k/?at=0001-01-01T00:10&tz=Asia/Tokyo", "at"),
    ("cells/k/timeline/?as_of=" + quote("2026-12-01T10:00:00+16:00"), "as_of"),
    ("cells/k/history/?as_of=" + quote("2026-12-01T10:00:00+16:00"), "as_of"),
    ("cells/k/graph/?jump=" + quote("2026-01-01T00:00+23:59"), "jump"),  # DataError
    ("read/?q=x&disclose=abc", "disclose"),  # KeyError
    ("read/?q=&k=", "q"),  # KeyError
    ("read/?q=x&k=abc", "k"),
    ("?q=" + quote("\x00"), "q"),
]


@pytest.mark.parametrize(("query", "name"), PROBE)
def test_the_probes_queries_are_400_naming_the_parameter(reviewer: Client, ns: Any,
                                                         query: str, name: str) -> None:
    response = reviewer.get(f"/ns/{ns.name}/{query}")
    assert response.status_code == 400, (query, response.status_code)
    body = response.content.decode()
    named = response.json()["parameter"] if response["Content-Type"].startswith(
        "application/json") else body
    assert name in named, body[:500]


def test_a_jump_to_a_time_past_what_postgresql_holds_shows_the_page_with_the_reason(
        reviewer: Client, ns: Any) -> None:
    response = reviewer.get(f"/ns/{ns.name}/cells/k/?jump=" + quote("2026-01-01T00:00+23:59"))
    assert response.status_code == 400
    assert "±15:59" in response.content.decode()  # in the jump form's status line


def test_the_date_field_in_the_browsers_zone_lands_on_the_canonical_as_of(
        reviewer: Client, ns: Any) -> None:
    response = reviewer.get(f"/ns/{ns.name}/cells/k/?at=2026-12-01T09:00&tz=Asia/Tokyo")
    assert response.status_code == 302
    assert response["Location"].endswith("?as_of=2026-12-01T00%3A00%3A00.000000%2B00%3A00")
    blank = reviewer.get(f"/ns/{ns.name}/?as_of=%20")
    assert blank.status_code == 302 and blank["Location"] == f"/ns/{ns.name}/"
