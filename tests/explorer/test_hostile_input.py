"""The explorer under a hostile or foreign-script hand: ``next`` stays on this site, a viewer
never receives the action forms, keys in every script render and link."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

import pytest
from django.test import Client
from django.urls import reverse

from memory.models import Membership
from memory.services import observation_fail, observation_record, operation_apply

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def ns(ns: Any) -> Any:
    """A namespace with one cell, ``alice_home_city``."""
    operation_apply(namespace=ns, key="alice_home_city", op="accept", value="Lisbon",
                    actor="user:t")
    return ns


def _failed(ns: Any) -> Any:
    evidence = observation_record(namespace=ns, text="x = 1").evidence
    observation_fail(evidence_id=evidence.pk, error="boom")
    return evidence


@pytest.mark.parametrize("target", [
    "https://evil.example/phish", "//evil.example/phish", "/\\evil.example", "\\\\evil.example",
    "javascript:alert(1)", "JavaScript:alert(1)", "data:text/html,x", "ftp://evil.example/",
    "evil.example/phish", " /ns/", "/\x00x", "http://testserver@evil.example/",
])
def test_retry_redirects_only_to_a_path_of_this_site(target: str, ns: Any,
                                                     make_user: Any) -> None:
    evidence = _failed(ns)
    client = client_for(make_user("reviewer", ns))
    response = client.post(f"/ns/{ns.name}/observations/{evidence.pk}/retry/",
                           {"next": target})
    assert response.status_code == 302
    assert response["Location"] == f"/ns/{ns.name}/operations/"


def test_retry_follows_a_next_path_of_this_site(ns: Any, make_user: Any) -> None:
    evidence = _failed(ns)
    client = client_for(make_user("reviewer", ns))
    back = f"/ns/{ns.name}/?show=failed"
    response = client.post(f"/ns/{ns.name}/observations/{evidence.pk}/retry/",
                           {"next": back})
    assert response.status_code == 302 and response["Location"] == back


def test_login_does_not_follow_a_next_to_another_site(ns: Any, make_user: Any) -> None:
    from tests.explorer.conftest import PASSWORD

    user = make_user("viewer", ns)
    response = Client().post("/accounts/login/?next=https://evil.example/",
                             {"username": user.username, "password": PASSWORD,
                              "next": "https://evil.example/"})
    assert response.status_code == 302 and "evil.example" not in response["Location"]


@pytest.mark.parametrize("query", ["?part=actions", "?part=state", "", "?part=weird"])
def test_a_viewer_never_receives_the_action_forms(query: str, ns: Any,
                                                  make_user: Any) -> None:
    client = client_for(make_user(Membership.Role.VIEWER, ns))
    response = client.get(f"/ns/{ns.name}/cells/alice_home_city/panel/{query}", **HTMX)
    body = response.content.decode()
    assert 'method="post"' not in body and "Correct this memory" not in body
    assert response.status_code == (403 if query == "?part=actions" else 200)


@pytest.mark.parametrize("path", ["/ns/{ns}/", "/ns/{ns}/operations/",
                                  "/ns/{ns}/observations/list/", "/ns/{ns}/?show=failed",
                                  "/ns/{ns}/cells/alice_home_city/", "/ns/{ns}/review/",
                                  "/ns/{ns}/cells/alice_home_city/diff/"])
def test_no_page_or_fragment_gives_a_viewer_a_post_form(path: str, ns: Any,
                                                        make_user: Any) -> None:
    _failed(ns)
    client = client_for(make_user(Membership.Role.VIEWER, ns))
    for extra in ({}, HTMX):
        body = client.get(path.format(ns=ns.name), **extra).content.decode()
        forms = re.findall(r'<form[^>]*method="post"[^>]*>', body)
        assert [f for f in forms if "/accounts/logout/" not in f] == [], path


def test_a_reviewer_still_receives_the_action_forms(ns: Any, make_user: Any) -> None:
    client = client_for(make_user("reviewer", ns))
    body = client.get(f"/ns/{ns.name}/cells/alice_home_city/panel/?part=actions",
                      **HTMX).content.decode()
    assert "Correct this memory" in body


KEYS = {"電話 1": "電話_1", "пароль": "пароль", "مفتاح": "مفتاح", "कि": "कि",
        "favourite 🍕 food": "favourite_food"}


def test_keys_of_every_script_render_and_link(ns: Any, make_user: Any) -> None:
    for raw in KEYS:
        operation_apply(namespace=ns, key=raw, op="accept", value=f"value of {raw}",
                        actor="user:t")
    client = client_for(make_user("reviewer", ns))
    frontier = client.get(f"/ns/{ns.name}/").content.decode()
    for raw, key in KEYS.items():
        url = reverse("explorer:cell", args=[ns.name, key])
        assert url == f"/ns/{ns.name}/cells/{quote(key)}/"
        assert f'href="{url}"' in frontier and key in frontier
        page = client.get(url)
        assert page.status_code == 200 and f"value of {raw}" in page.content.decode()
        assert client.get(url + "graph/").json()["key"] == key
        log = client.get(f"/ns/{ns.name}/operations/", {"key": key}).content.decode()
        assert f"value of {raw}" in log
    # a raw spelling in the address reaches the canonical page
    response = client.get(f"/ns/{ns.name}/cells/{quote('電話 1')}/")
    assert response.status_code == 302 and response["Location"] == reverse(
        "explorer:cell", args=[ns.name, "電話_1"])
    # and a reviewer acts on such a cell
    response = client.post(reverse("explorer:cell_operate", args=[ns.name, "कि"]),
                           {"op": "accept", "value": "new", "reason": "test"})
    assert response.status_code == 302
