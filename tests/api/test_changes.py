"""The change feed over HTTP (CONTRACT "Change events"): pages after a cursor with ``next``, a
long poll woken by the commit's notice, server-sent events on the same URL (ids, resume with
Last-Event-ID, keep-alive comments, a bounded life), the read scope, and 400 on bad input."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import requests
from django.db import connection
from rest_framework.test import APIClient

from memory.api import change_views
from memory.selectors import changes
from memory.services import namespace_create, operation_apply, token_create
from tests.support.worker import wait_until

pytestmark = pytest.mark.django_db


def url(ns) -> str:
    return f"/api/v1/namespaces/{ns.name}/changes/"


def accept(ns, key: str, value: str) -> None:
    operation_apply(namespace=ns, key=key, op="accept", value=value, actor="user:t")


def accept_later(seconds: float, ns, key: str, value: str) -> None:
    """Commit from another thread after ``seconds`` (closing that thread's connection)."""

    def run() -> None:
        try:
            accept(ns, key, value)
        finally:
            connection.close()

    threading.Timer(seconds, run).start()


def test_pages_follow_next_in_commit_order(ns, api):
    for i in range(5):
        accept(ns, f"k{i}", f"v{i}")
    first = api.get(url(ns), {"limit": 2}).json()
    assert [e["cursor"] for e in first["results"]] == [1, 2]
    assert first["results"][0]["key"] == "k0" and first["results"][0]["op"] == "accept"
    second = api.get(first["next"]).json()
    assert [e["cursor"] for e in second["results"]] == [3, 4]
    rest = api.get(api.get(second["next"]).json()["next"]).json()
    assert rest["results"] == [] and "after=5" in rest["next"]


def test_the_default_page_and_the_largest(ns, api):
    for i in range(3):
        accept(ns, "k", f"v{i}")
    assert len(api.get(url(ns)).json()["results"]) == 3
    assert api.get(url(ns), {"limit": 1000}).status_code == 200


@pytest.mark.parametrize("params", [{"after": "-1"}, {"after": "x"}, {"after": "1e3"},
                                    {"after": str(2**63)}, {"limit": "0"}, {"limit": "1001"},
                                    {"wait": "61"}, {"wait": "-1"}, {"wait": "soon"}])
def test_bad_parameters_are_refused_naming_them(ns, api, params):
    answer = api.get(url(ns), params)
    assert answer.status_code == 400
    assert next(iter(params)) in str(answer.json())


def test_a_bad_last_event_id_is_refused(ns, api):
    answer = api.get(url(ns), HTTP_ACCEPT="text/event-stream", HTTP_LAST_EVENT_ID="abc")
    assert answer.status_code == 400 and "Last-Event-ID" in str(answer.json())


def test_a_read_token_reads_the_feed_and_another_namespaces_does_not(ns):
    accept(ns, "k", "v")
    reader = APIClient()
    reader.credentials(HTTP_AUTHORIZATION=f"Token {token_create(namespace=ns, scope='read').key}")
    assert reader.get(url(ns)).json()["results"][0]["value"] == "v"
    other = APIClient()
    elsewhere = namespace_create(name="feed-elsewhere")
    other.credentials(HTTP_AUTHORIZATION=f"Token {token_create(namespace=elsewhere).key}")
    assert other.get(url(ns)).status_code in (403, 404)
    assert APIClient().get(url(ns)).status_code in (401, 403)


def test_an_erased_keys_events_leave_the_feed(ns, api):
    from memory.services import cell_erase

    accept(ns, "secret", "hidden")
    accept(ns, "kept", "v")
    cell_erase(namespace=ns, key="secret", actor="user:t")
    body = api.get(url(ns)).json()
    assert [(e["op"], e["key"]) for e in body["results"]] == [("accept", "kept"),
                                                              ("erase", "secret")]
    assert "hidden" not in str(body)


@pytest.mark.django_db(transaction=True)
def test_a_long_poll_is_woken_by_the_commit_not_by_polling(monkeypatch):
    monkeypatch.setattr(changes, "SAFETY_SECONDS", 600.0)  # only a notice can wake it
    ns = namespace_create(name="feed-long-poll")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token_create(namespace=ns).key}")
    out: dict[str, Any] = {}

    def poll() -> None:
        try:
            started = time.monotonic()
            out["body"] = api.get(url(ns), {"wait": 60}).json()
            out["seconds"] = time.monotonic() - started
        finally:
            connection.close()

    thread = threading.Thread(target=poll)
    thread.start()
    wait_until(lambda: changes.LISTENER.waiting(ns.pk), message="the long poll")
    accept(ns, "k", "v")
    thread.join(timeout=60)
    assert [e["value"] for e in out["body"]["results"]] == ["v"]
    assert out["seconds"] < 60  # woken by the notice, long before its wait ran out


@pytest.mark.django_db(transaction=True)
def test_a_long_poll_with_events_there_answers_at_once():
    ns = namespace_create(name="feed-at-once")
    accept(ns, "k", "v")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token_create(namespace=ns).key}")
    assert api.get(url(ns), {"wait": 60}).json()["results"][0]["cursor"] == 1


# --- server-sent events, through a real HTTP server ------------------------------------------


def _frames(response: requests.Response, until: int) -> list[dict[str, str]]:
    """Parse server-sent event frames until ``until`` events (comments kept as ``comment``)."""
    frames: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in response.iter_lines(decode_unicode=True):
        if line == "":
            if current:
                frames.append(current)
                current = {}
            if sum(1 for f in frames if "id" in f) >= until:
                break
            continue
        name, _, value = line.partition(":")
        current[name or "comment"] = value.strip()
    return frames


@pytest.fixture
def stream(live_server, settings):
    settings.PMEM_CHANGES_KEEPALIVE = 0.2
    settings.PMEM_CHANGES_STREAM_SECONDS = 30.0

    def open_(ns, token: str, query: str = "", **headers: str) -> requests.Response:
        return requests.get(f"{live_server.url}{url(ns)}{query}", stream=True, timeout=30,
                            headers={"Accept": "text/event-stream",
                                     "Authorization": f"Token {token}", **headers})

    return open_


@pytest.mark.django_db(transaction=True)
def test_a_stream_sends_each_event_as_it_commits_with_keep_alives(stream):
    ns = namespace_create(name="feed-sse")
    token = token_create(namespace=ns).key
    accept(ns, "k", "first")
    with stream(ns, token) as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        accept_later(0.6, ns, "k", "second")
        frames = _frames(response, until=2)
    events = [f for f in frames if "id" in f]
    assert [(f["id"], f["event"]) for f in events] == [("1", "change"), ("2", "change")]
    assert '"value":"second"' in events[1]["data"]
    assert any(f.get("comment") == "keep-alive" for f in frames)  # the idle 0.6 s
    assert frames[0].get("retry")


@pytest.mark.django_db(transaction=True)
def test_a_stream_resumes_after_last_event_id_or_after(stream):
    ns = namespace_create(name="feed-resume")
    token = token_create(namespace=ns).key
    for value in ("a", "b", "c"):
        accept(ns, "k", value)
    with stream(ns, token, **{"Last-Event-ID": "2"}) as response:
        assert [f["id"] for f in _frames(response, until=1) if "id" in f] == ["3"]
    with stream(ns, token, "?after=1") as response:  # a client that cannot set the header
        assert [f["id"] for f in _frames(response, until=2) if "id" in f] == ["2", "3"]
    with stream(ns, token) as response:
        assert [f["id"] for f in _frames(response, until=3) if "id" in f] == ["1", "2", "3"]


@pytest.mark.django_db(transaction=True)
def test_a_stream_ends_after_its_time_with_a_retry_hint(stream, settings):
    settings.PMEM_CHANGES_STREAM_SECONDS = 0.5
    ns = namespace_create(name="feed-ends")
    token = token_create(namespace=ns).key
    with stream(ns, token) as response:
        body = response.text  # returns only because the server ended the stream
    assert body.startswith("retry: ")


@pytest.mark.django_db(transaction=True)
def test_over_the_process_cap_a_subscriber_gets_what_is_there_and_comes_back(stream, settings):
    settings.PMEM_CHANGES_STREAMS = 1
    ns = namespace_create(name="feed-cap")
    token = token_create(namespace=ns).key
    accept(ns, "k", "v")
    with stream(ns, token) as held:
        _frames(held, until=1)
        wait_until(lambda: change_views.SLOTS.open == 1, message="the first stream")
        with stream(ns, token) as busy:
            body = busy.text  # ends at once: no thread is held for it
    assert f"retry: {change_views.RETRY_BUSY_MS}" in body and "id: 1" in body


def test_a_long_poll_over_the_process_cap_is_answered_at_once(ns, api, settings):
    settings.PMEM_CHANGES_STREAMS = 0  # every thread the streams may take is taken
    body = api.get(url(ns), {"wait": 60}).json()  # would wait a minute with a slot free
    assert body["results"] == [] and "after=0" in body["next"]
