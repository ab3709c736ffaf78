"""Facts that end (SPEC §13): a fact's ``ttl`` or ``expires_at`` is kept on its version and
answered with it; from that instant no read serves it as current, whether or not beat ran; an
``expire`` operation (system:expiry) closes it; ``as_of`` is exact on both sides; nothing is
reinstated.

The clock is moved by writing the instant on the version (``_pass``): waiting for a real ttl
would make the tests race the machine's load."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from memory.models import Operation, Version
from memory.services import namespace_create, token_create
from memory.tasks import expire_facts

pytestmark = pytest.mark.django_db


@pytest.fixture
def space():
    return namespace_create(name="expiring")


@pytest.fixture
def api(space) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(namespace=space).key}")
    return client


def remember(api: APIClient, *facts: dict[str, Any], status: int = 201) -> Any:
    answer = api.post("/api/v1/namespaces/expiring/observations/?wait=1",
                      json.dumps({"facts": list(facts)}), content_type="application/json")
    assert answer.status_code == status, answer.content
    return answer.json()


def cell(api: APIClient, key: str, as_of: datetime | None = None) -> Any:
    query = f"?as_of={as_of.isoformat().replace('+00:00', 'Z')}" if as_of else ""
    return api.get(f"/api/v1/namespaces/expiring/cells/{key}/{query}").json()


def read(api: APIClient, query: str, mode: str = "frontier") -> list[Any]:
    answer = api.post("/api/v1/namespaces/expiring/read/",
                      json.dumps({"query": query, "mode": mode}), content_type="application/json")
    assert answer.status_code == 200, answer.content
    return answer.json()["items"]


def _pass(key: str, value: str) -> datetime:
    """The version's expiry, moved to just after it was committed: now in the past."""
    version = Version.objects.get(cell__key=key, value=value)
    instant = version.created_at + timedelta(milliseconds=1)
    Version.objects.filter(pk=version.pk).update(expires_at=instant)
    return instant


def test_a_ttl_is_kept_on_the_version_and_answered_with_it(api):
    before = timezone.now()
    remember(api, {"key": "door_code", "value": "4711", "ttl": 3600})
    body = cell(api, "door_code")
    expires = datetime.fromisoformat(body["expires_at"].replace("Z", "+00:00"))
    assert before + timedelta(seconds=3600) <= expires <= timezone.now() + timedelta(seconds=3600)
    assert body["history"][0]["expires_at"] == body["expires_at"]
    items = read(api, "door code")
    assert [(i["key"], i["value"], i["expires_at"]) for i in items] == [
        ("door_code", "4711", body["expires_at"])]
    remember(api, {"key": "trip_city", "value": "Rome", "expires_at": "2030-01-02T03:04:05+01:00"})
    assert cell(api, "trip_city")["expires_at"] == "2030-01-02T02:04:05Z"
    assert cell(api, "door_code")["history"][0]["expires_at"] is not None
    remember(api, {"key": "forever", "value": "yes"})
    assert cell(api, "forever")["expires_at"] is None


@pytest.mark.parametrize("fact,field", [
    ({"ttl": 0}, "ttl"), ({"ttl": 11 * 366 * 24 * 3600}, "ttl"), ({"ttl": "60"}, "ttl"),
    ({"expires_at": "2030-01-02T03:04:05"}, "expires_at"),
    ({"expires_at": "soon"}, "expires_at"),
    ({"ttl": 60, "expires_at": "2030-01-02T03:04:05Z"}, "ttl"),
    ({"op": "revoke", "value": None, "ttl": 60}, "ttl"),
])
def test_a_bad_expiry_is_400_naming_the_field_and_stores_nothing(api, space, fact, field):
    answer = remember(api, {"key": "door_code", "value": "4711", **fact}, status=400)
    assert field in json.dumps(answer)
    assert not space.evidence.exists()


def test_after_the_instant_no_read_serves_it_and_the_expire_operation_says_why(api):
    remember(api, {"key": "door_code", "value": "4711", "ttl": 3600},
              {"key": "wifi", "value": "hunter2"})
    instant = _pass("door_code", "4711")
    # No job has run: the reads themselves see that the instant passed.
    body = cell(api, "door_code")
    assert (body["status"], body["value"], body["version"]) == ("empty", None, None)
    assert [(h["value"], h["status"]) for h in body["history"]] == [("4711", "expired")]
    for mode in ("frontier", "frontier_cosine"):
        assert "door_code" not in [i["key"] for i in read(api, "door code 4711", mode)], mode
    assert "4711" in " ".join(i["text"] for i in read(api, "door code 4711", "raw"))  # evidence
    listed = api.get("/api/v1/namespaces/expiring/cells/").json()["results"]
    assert {c["key"]: c["value"] for c in listed} == {"door_code": None, "wifi": "hunter2"}
    expire = Operation.objects.get(type="expire")
    assert (expire.actor, expire.key, expire.value) == ("system:expiry", "door_code", "4711")
    log = api.get("/api/v1/namespaces/expiring/operations/?key=door_code").json()["results"]
    assert log[0]["op"] == "expire" and log[0]["actor"] == "system:expiry"
    # As of an instant before it: the value; from it on: empty.
    assert cell(api, "door_code", instant - timedelta(microseconds=1))["value"] == "4711"
    assert cell(api, "door_code", instant)["status"] == "empty"
    graph = api.get("/api/v1/namespaces/expiring/cells/door_code/graph/").json()
    assert [n["status"] for n in graph["nodes"] if n["kind"] == "version"] == ["expired"]


def test_expiry_is_not_retraction_nothing_is_reinstated(api):
    remember(api, {"key": "location", "value": "home"})
    remember(api, {"key": "location", "value": "airport", "ttl": 600})
    _pass("location", "airport")
    body = cell(api, "location")
    assert body["status"] == "empty"
    assert [(h["value"], h["status"]) for h in body["history"]] == [
        ("airport", "expired"), ("home", "superseded")]
    # A write after the instant starts from an empty cell.
    remember(api, {"key": "location", "value": "hotel"})
    body = cell(api, "location")
    assert (body["value"], body["status"]) == ("hotel", "active")
    assert [h["status"] for h in body["history"]] == ["active", "expired", "superseded"]


def test_a_value_replaced_before_its_instant_stays_replaced(api):
    remember(api, {"key": "session", "value": "s1", "ttl": 600})
    remember(api, {"key": "session", "value": "s2"})
    _pass("session", "s1")
    body = cell(api, "session")
    assert (body["value"], body["status"]) == ("s2", "active")
    assert not Operation.objects.filter(type="expire").exists()


def test_an_alternative_that_expires_leaves_the_head_alone(api):
    remember(api, {"key": "mood", "value": "calm"})
    remember(api, {"key": "mood", "value": "tense", "op": "contest", "ttl": 600})
    assert cell(api, "mood")["status"] == "contested"
    _pass("mood", "tense")
    body = cell(api, "mood")
    assert (body["value"], body["status"], body["alternatives"]) == ("calm", "active", [])


def test_beat_records_the_expiry_without_any_read(api, space):
    remember(api, {"key": "door_code", "value": "4711", "ttl": 3600})
    _pass("door_code", "4711")
    assert expire_facts() == 1
    version = Version.objects.get(value="4711")
    assert version.status == "expired" and version.cell.head_id is None
    assert expire_facts() == 0  # recorded once
    assert Operation.objects.filter(namespace=space, type="expire").count() == 1


def test_the_explorer_shows_the_expiry_on_the_version_and_in_the_history(api, space):
    from django.contrib.auth import get_user_model
    from django.test import Client

    from memory.services import membership_set

    remember(api, {"key": "door_code", "value": "4711", "ttl": 3600})
    person = get_user_model().objects.create_user("watcher")
    membership_set(namespace=space, user=person, role="viewer")
    browser = Client()
    browser.force_login(person)
    version = Version.objects.get(value="4711")
    page = browser.get("/ns/expiring/cells/door_code/").content.decode()
    assert 'data-testid="expiry-1"' in page and "expires" in page
    panel = browser.get(f"/ns/expiring/cells/door_code/versions/{version.pk}/").content.decode()
    assert 'data-testid="version-expiry"' in panel
    _pass("door_code", "4711")
    page = browser.get("/ns/expiring/cells/door_code/").content.decode()
    assert "badge-expired" in page and ">expired <time" in page
