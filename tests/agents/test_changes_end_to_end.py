"""The change feed end to end, through the public surface only (CONTRACT "Change events"): a
stack of its own — PostgreSQL, Redis, gunicorn started with ``make run``'s command line, a
Celery worker with beat — written to over HTTP by several clients, and read as a subscriber
would: pages after a cursor, a long poll woken by another client's commit, server-sent events
resumed with ``Last-Event-ID`` across a dropped connection and the server's end of a stream,
webhooks made with ``manage.py pmem_webhook`` whose receiver fails and times out for a while,
checked with the Standard Webhooks library, scopes, and an erase."""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest
from standardwebhooks import Webhook

from tests.support.stack import (
    PgCluster,
    RedisServer,
    Service,
    app_env,
    celery_worker,
    free_port,
    manage,
    rmtree,
    wait_for,
    wait_web_ready,
    wait_worker_ready,
)
from tests.support.webhook_receiver import WebhookReceiver

pytestmark = [pytest.mark.worker]

ROOT = Path(__file__).resolve().parents[2]
#: The event's fields as CONTRACT lists them.
EVENT_FIELDS = {"cursor", "op", "key", "version", "ordinal", "value", "previous", "status",
                "cell_status", "actor", "method", "source", "reason", "observation",
                "committed_at"}
STREAM_SECONDS = 6
STREAMS = 2

# --- the stack --------------------------------------------------------------------------------


@dataclass
class Stack:
    url: str
    env: dict[str, str]
    web: Service
    worker: Service

    def manage(self, *args: str, **env: str) -> str:
        return manage({**self.env, **env}, *args)

    def manage_json(self, *args: str, **env: str) -> dict[str, Any]:
        return dict(json.loads(self.manage(*args, **env).strip().splitlines()[-1]))

    def namespace(self, prefix: str) -> tuple[str, str]:
        """A new namespace and its ``review`` token (``pmem_namespace create``)."""
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        return name, str(self.manage_json("pmem_namespace", "create", name)["token"])

    def logs(self) -> str:
        return f"--- web ---\n{self.web.text()[-3000:]}\n--- worker ---\n{self.worker.text()[-4000:]}"


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    from pmem_site.run import web_command

    root = (Path(os.environ.get("PMEM_DATA_DIR", ROOT / "var" / "test"))
            / f"changes-e2e-{uuid.uuid4().hex[:6]}")
    pg = PgCluster(root / "pg").init().start()
    redis = RedisServer(root / "redis").start()
    services: list[Service] = []
    try:
        pg.create_database()
        env = app_env(data_dir=root, database_url=pg.url(), redis_url=redis.url(),
                      queue=f"pmem-e2e-{uuid.uuid4().hex[:6]}",
                      PMEM_WEBHOOK_ALLOW_PRIVATE="1", PMEM_WEBHOOK_RETRY_BASE="0.3",
                      PMEM_WEBHOOK_RETRY_CAP="2", PMEM_WEBHOOK_TIMEOUT="2",
                      PMEM_WEBHOOK_CONNECT_TIMEOUT="1", PMEM_WEBHOOK_EVERY="1",
                      PMEM_CHANGES_KEEPALIVE="1", PMEM_CHANGES_STREAM_SECONDS=str(STREAM_SECONDS),
                      PMEM_CHANGES_STREAMS=str(STREAMS))
        manage(env, "migrate", "--no-input", "-v", "0")
        port = free_port()
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("PMEM_WEB_WORKERS", "1")  # one process: the stream cap is per process
            argv = web_command(port, root / "gunicorn.ctl")
        web = Service("web", argv, env, root / "web.log").start()
        services.append(web)
        worker = celery_worker(env, name="w1", log=root / "w1.log").start()
        services.append(worker)
        built = Stack(f"http://127.0.0.1:{port}", env, web, worker)
        wait_web_ready(built.url, web)
        wait_worker_ready(worker)
        yield built
    finally:
        for service in services:
            service.stop()
        redis.stop()
        pg.stop()
        rmtree(root)


# --- clients ----------------------------------------------------------------------------------


def client(stack: Stack, token: str | None) -> httpx2.Client:
    headers = {"Authorization": f"Token {token}"} if token else {}
    return httpx2.Client(base_url=stack.url, headers=headers, timeout=90)


def remember(http: httpx2.Client, ns: str, facts: dict[str, str]) -> None:
    """Facts written and committed (``wait=1``)."""
    answer = http.post(f"/api/v1/namespaces/{ns}/observations/", params={"wait": "1"},
                       json={"facts": [{"key": k, "value": v} for k, v in facts.items()]})
    assert answer.status_code == 201, answer.text


def feed(http: httpx2.Client, ns: str, after: int | None = None) -> list[dict[str, Any]]:
    """The whole feed after ``after``, by pages of 1000."""
    events: list[dict[str, Any]] = []
    params: dict[str, Any] = {"limit": 1000, **({"after": after} if after else {})}
    while True:
        answer = http.get(f"/api/v1/namespaces/{ns}/changes/", params=params)
        assert answer.status_code == 200, answer.text
        page = answer.json()["results"]
        if not page:
            return events
        events += page
        params["after"] = page[-1]["cursor"]


@dataclass
class Frame:
    id: str | None = None
    event: str | None = None
    data: str = ""
    retry: int | None = None


@dataclass
class Stream:
    """One server-sent-events connection, parsed as EventSource parses it."""

    frames: list[Frame] = field(default_factory=list)
    comments: int = 0
    retry: int | None = None
    status: int = 0
    content_type: str = ""


def read_stream(http: httpx2.Client, ns: str, *, last_id: str | None = None,
                after: int | None = None, stop: Any = None) -> Stream:
    """Read a stream until the server ends it, or until ``stop(stream)`` says to drop the
    connection (a network break, as the client sees it)."""
    headers = {"Accept": "text/event-stream"}
    if last_id is not None:
        headers["Last-Event-ID"] = last_id
    out = Stream()
    params = {"after": after} if after is not None else {}
    with http.stream("GET", f"/api/v1/namespaces/{ns}/changes/", headers=headers,
                     params=params) as response:
        out.status, out.content_type = response.status_code, response.headers["content-type"]
        if response.status_code != 200:
            response.read()
            return out
        frame = Frame()
        for line in response.iter_lines():
            if line == "":
                if frame.data or frame.id is not None:
                    out.frames.append(frame)
                frame = Frame()
                if stop is not None and stop(out):
                    return out
                continue
            if line.startswith(":"):
                out.comments += 1
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "id":
                frame.id = value
            elif name == "event":
                frame.event = value
            elif name == "data":
                frame.data += value
            elif name == "retry":
                out.retry = int(value)
    return out


def later(seconds: float, work: Any) -> threading.Thread:
    def run() -> None:
        time.sleep(seconds)
        work()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


# --- the feed ---------------------------------------------------------------------------------


def test_the_feed_pages_after_a_cursor_in_commit_order_and_replays_to_the_frontier(stack):
    ns, token = stack.namespace("feed")
    with client(stack, token) as http:
        remember(http, ns, {"city": "Paris", "team": "red"})
        remember(http, ns, {"city": "Lyon"})
        remember(http, ns, {"pet": "cat", "team": "blue"})
        answer = http.post(f"/api/v1/namespaces/{ns}/cells/city/operations/",
                           json={"op": "revoke", "reason": "wrong"})
        assert answer.status_code == 201, answer.text

        pages, url = [], f"/api/v1/namespaces/{ns}/changes/?limit=2"
        while True:
            body = http.get(url).json()
            if not body["results"]:
                break
            assert len(body["results"]) <= 2
            pages.append(body["results"])
            url = body["next"]
        events = [e for page in pages for e in page]
        assert events == feed(http, ns)  # pages of two are the one read of all
        cursors = [e["cursor"] for e in events]
        assert cursors == sorted(set(cursors))
        assert all(EVENT_FIELDS <= set(e) for e in events)
        city = [(e["op"], e["value"]) for e in events if e["key"] == "city"]
        assert city == [("accept", "Paris"), ("accept", "Lyon"), ("revoke", "Lyon"),
                        ("reinstate", "Paris")]
        lyon = next(e for e in events if e["key"] == "city" and e["value"] == "Lyon")
        assert lyon["previous"]["value"] == "Paris" and lyon["observation"]
        revoke = next(e for e in events if e["op"] == "revoke")
        assert revoke["reason"] == "wrong" and revoke["method"] == "explicit"

        # after a cursor: exactly the rest
        assert feed(http, ns, after=cursors[2]) == events[3:]
        # caught up: no events, and a next that asks after the last one
        body = http.get(url).json()
        assert body["results"] == [] and f"after={cursors[-1]}" in body["next"]

        # replaying the feed rebuilds the frontier
        replayed: dict[str, tuple[str | None, str]] = {}
        for e in events:
            head = e.get("head")
            replayed[e["key"]] = (head["value"] if head else None, e["cell_status"])
        cells = http.get(f"/api/v1/namespaces/{ns}/cells/").json()["results"]
        assert {c["key"]: (c["value"], c["status"]) for c in cells} == replayed


@pytest.mark.parametrize("params", [{"after": "-1"}, {"after": "x"}, {"limit": "0"},
                                    {"limit": "1001"}, {"wait": "61"}, {"wait": "1.5"}])
def test_bad_feed_parameters_are_a_json_400_naming_them(stack, params):
    ns, token = stack.namespace("bad")
    with client(stack, token) as http:
        answer = http.get(f"/api/v1/namespaces/{ns}/changes/", params=params)
        assert answer.status_code == 400, answer.text
        assert answer.json()["field"] == next(iter(params))
        answer = http.get(f"/api/v1/namespaces/{ns}/changes/",
                          headers={"Accept": "text/event-stream", "Last-Event-ID": "nope"})
        assert answer.status_code == 400
        assert answer.headers["content-type"].startswith("application/json")
        assert answer.json()["field"] == "Last-Event-ID"


def test_a_long_poll_is_woken_by_another_clients_commit(stack):
    ns, token = stack.namespace("poll")
    reader = stack.manage_json("pmem_token", "create", ns, "--scope", "read")["token"]
    with client(stack, token) as writer, client(stack, reader) as http:
        remember(writer, ns, {"first": "1"})
        body = http.get(f"/api/v1/namespaces/{ns}/changes/").json()
        last = body["results"][-1]["cursor"]

        got: dict[str, Any] = {}
        poll = threading.Thread(target=lambda: got.update(http.get(
            body["next"] + "&wait=45").json()), daemon=True)
        poll.start()
        time.sleep(1.5)  # the poll is waiting by now
        assert poll.is_alive(), got
        remember(writer, ns, {"second": "2"})
        poll.join(60)

        assert [(e["key"], e["value"]) for e in got["results"]] == [("second", "2")]
        assert got["results"][0]["cursor"] > last

        # a wait that runs out answers no events, and the same place to ask again
        quiet = http.get(got["next"].replace("wait=45", "wait=1")).json()
        assert quiet["results"] == [] and f"after={got['results'][0]['cursor']}" in quiet["next"]


def test_a_subscriber_of_a_namespace_not_written_yet_is_woken_by_its_first_write(stack):
    """An application's namespace is made by its first write; a subscriber started before it
    (the natural order: follow, then write) is woken by that write, as by any other."""
    prefix = f"app{uuid.uuid4().hex[:4]}-"
    app = stack.manage_json("pmem_token", "create", "--prefix", prefix, "--scope", "write")
    ns = prefix + "alice"
    with client(stack, app["token"]) as writer, client(stack, app["token"]) as http:
        empty = http.get(f"/api/v1/namespaces/{ns}/changes/")
        assert empty.status_code == 200 and empty.json()["results"] == []

        got: dict[str, Any] = {}
        poll = threading.Thread(target=lambda: got.update(http.get(
            f"/api/v1/namespaces/{ns}/changes/?wait=20").json()), daemon=True)
        poll.start()
        time.sleep(1.5)
        assert poll.is_alive(), got
        remember(writer, ns, {"first": "1"})
        poll.join(30)
        assert [e["key"] for e in got["results"]] == ["first"]

    other = prefix + "bob"
    with client(stack, app["token"]) as writer, client(stack, app["token"]) as http:
        writing = later(1.5, lambda: remember(writer, other, {"hello": "1"}))
        stream = read_stream(http, other, stop=lambda s: bool(s.frames))
        writing.join(30)
        assert [json.loads(f.data)["key"] for f in stream.frames] == ["hello"]


# --- server-sent events -----------------------------------------------------------------------


def test_server_sent_events_resume_after_a_break_and_the_streams_end_exactly_once(stack):
    ns, token = stack.namespace("sse")
    with client(stack, token) as writer, client(stack, token) as http:
        remember(writer, ns, {"a0": "0", "b0": "0"})

        def write_more() -> None:
            with client(stack, token) as other:
                for i in range(1, 17):
                    remember(other, ns, {f"a{i}": str(i)})
                    time.sleep(0.5)

        writing = later(0.5, write_more)
        seen: list[dict[str, Any]] = []
        last_id: str | None = None
        dropped = ended = comments = 0
        while writing.is_alive() or not seen or seen[-1]["cursor"] < feed(http, ns)[-1]["cursor"]:
            # the first connection is dropped by the client after four events (a network
            # break); the others run until the server ends them
            stream = read_stream(http, ns, last_id=last_id,
                                 stop=(lambda s: len(s.frames) >= 4) if not dropped else None)
            assert stream.status == 200 and stream.content_type.startswith("text/event-stream")
            for frame in stream.frames:
                assert frame.event == "change"
                event = json.loads(frame.data)
                assert frame.id == str(event["cursor"])
                seen.append(event)
                last_id = frame.id
            comments += stream.comments
            if not dropped:
                dropped = 1
            else:
                ended += 1
                assert stream.retry is not None  # the server's end says when to come back
                time.sleep(stream.retry / 1000)
        assert ended >= 2  # at least one stream ran out while events were still coming

        assert seen == feed(http, ns)  # every event exactly once, in cursor order
        assert len(seen) == 18
        assert comments >= 1  # keep-alive comments while idle


def test_streams_over_the_cap_are_answered_at_once_and_the_api_keeps_serving(stack):
    ns, token = stack.namespace("cap")
    with client(stack, token) as http:
        remember(http, ns, {"k": "v"})
        opened = threading.Barrier(STREAMS + 1)
        holders = []
        for _ in range(STREAMS):
            def hold() -> None:
                waited: list[bool] = []

                def first_event(s: Stream) -> bool:
                    if s.frames and not waited:
                        waited.append(True)
                        opened.wait(30)
                    return False  # hold the stream until the server ends it

                with client(stack, token) as own:
                    read_stream(own, ns, stop=first_event)

            thread = threading.Thread(target=hold, daemon=True)
            thread.start()
            holders.append(thread)
        opened.wait(30)  # both hold a slot (each has had its first event)

        over = read_stream(http, ns)  # the cap reached: what there is now, and come back later
        assert [json.loads(f.data)["key"] for f in over.frames] == ["k"]
        assert over.retry is not None and over.retry > 1000
        poll = http.get(f"/api/v1/namespaces/{ns}/changes/", params={"after": 1, "wait": 30})
        assert poll.status_code == 200 and poll.json()["results"] == []
        assert http.get(f"/api/v1/namespaces/{ns}/cells/k/").status_code == 200
        assert all(t.is_alive() for t in holders)  # all of that while both streams were open
        for thread in holders:
            thread.join(STREAM_SECONDS + 30)


# --- scopes -----------------------------------------------------------------------------------


def test_only_tokens_that_read_the_namespace_read_its_feed(stack):
    ns, token = stack.namespace("scoped")
    other, other_token = stack.namespace("other")
    reader = stack.manage_json("pmem_token", "create", ns, "--scope", "read")["token"]
    prefix = f"app{uuid.uuid4().hex[:4]}-"
    app = stack.manage_json("pmem_token", "create", "--prefix", prefix, "--scope", "read")
    inside, inside_token = stack.namespace(prefix + "x")
    with client(stack, token) as http:
        remember(http, ns, {"secret": "42"})
    with client(stack, inside_token) as http:
        remember(http, inside, {"mine": "1"})

    def status(token: str | None, name: str, stream: bool = False) -> int:
        with client(stack, token) as http:
            if stream:
                got = read_stream(http, name)
                if got.status != 200:
                    assert got.content_type.startswith("application/json")
                return got.status
            return http.get(f"/api/v1/namespaces/{name}/changes/").status_code

    assert status(reader, ns) == 200 and status(reader, ns, stream=True) == 200
    assert status(other_token, ns) in (403, 404)
    assert status(other_token, ns, stream=True) in (403, 404)
    assert status(None, ns) in (401, 403)
    assert status(app["token"], inside) == 200
    assert status(app["token"], ns) == 404 and status(app["token"], ns, stream=True) == 404
    assert status(app["token"], other) == 404

    revoked = stack.manage_json("pmem_token", "create", ns, "--scope", "read")
    stack.manage("pmem_token", "revoke", str(revoked["id"]))
    assert status(revoked["token"], ns) == 401


# --- webhooks ---------------------------------------------------------------------------------


def _check_deliveries(receiver: WebhookReceiver, secret: str,
                      expected: list[dict[str, Any]], ns: str) -> None:
    """Each event once in cursor order (first deliveries), each request verified with the
    Standard Webhooks library, and a webhook-id seen twice only with the same body."""
    hook = Webhook(secret)
    bodies: dict[str, bytes] = {}
    cursor_of: dict[str, int] = {}
    for r in receiver.all():
        payload = hook.verify(r.body, r.headers)
        assert bodies.setdefault(r.webhook_id, r.body) == r.body
        assert cursor_of.setdefault(r.webhook_id, payload["cursor"]) == payload["cursor"]
    assert len(set(cursor_of.values())) == len(cursor_of)  # one id per event
    first = [hook.verify(r.body, r.headers) for r in receiver.first_seen()]
    assert [e["cursor"] for e in first] == [e["cursor"] for e in expected]
    for got, want in zip(first, expected, strict=True):
        assert got["namespace"] == ns
        assert {k: v for k, v in got.items() if k != "namespace"} == want


def test_webhooks_deliver_every_event_in_order_through_failures_and_timeouts(stack):
    ns, token = stack.namespace("hook")
    with client(stack, token) as http, WebhookReceiver() as receiver, \
            WebhookReceiver() as accepts:
        remember(http, ns, {"before": "0"})  # committed before the endpoint: not sent
        made = stack.manage_json("pmem_webhook", "create", ns, "--url", receiver.url)
        assert set(made) == {"id", "namespace", "url", "secret"}
        assert made["namespace"] == ns and made["url"] == receiver.url
        assert made["secret"].startswith("whsec_")
        only = stack.manage_json("pmem_webhook", "create", ns, "--url", accepts.url,
                                 "--ops", "accept")
        start = feed(http, ns)[-1]["cursor"]

        receiver.answer(500)
        remember(http, ns, {"k": "1", "j": "1"})
        wait_for(lambda: sum(r.status == 500 for r in receiver.all()) >= 3, 60, "failures")
        remember(http, ns, {"k": "2"})
        assert http.post(f"/api/v1/namespaces/{ns}/cells/k/operations/",
                         json={"op": "revoke"}).status_code == 201
        receiver.answer(204)
        receiver.delay(3)  # past PMEM_WEBHOOK_TIMEOUT: timeouts, as the sender sees them
        arrived = receiver.arrived
        wait_for(lambda: receiver.arrived >= arrived + 2, 60, "timed-out attempts")
        receiver.delay(0)
        remember(http, ns, {"k": "3"})

        expected = feed(http, ns, after=start)
        assert {e["op"] for e in expected} >= {"accept", "revoke", "reinstate"}
        wait_for(lambda: len(receiver.first_seen()) >= len(expected), 90,
                 f"{len(expected)} deliveries")
        wait_for(lambda: len(accepts.first_seen()) >= sum(e["op"] == "accept" for e in expected),
                 60, "the accept deliveries")
        assert sum(r.status == 500 for r in receiver.all()) >= 3
        _check_deliveries(receiver, made["secret"], expected, ns)
        _check_deliveries(accepts, only["secret"], [e for e in expected if e["op"] == "accept"],
                          ns)

        # list: one JSON line per endpoint, never the secret; delete: the endpoint is gone
        listed = [json.loads(line) for line in
                  stack.manage("pmem_webhook", "list", ns).strip().splitlines()]
        assert [(e["id"], e["url"], e["ops"]) for e in listed] == [
            (made["id"], receiver.url, []), (only["id"], accepts.url, ["accept"])]
        assert all("secret" not in e for e in listed)
        assert made["secret"] not in stack.manage("pmem_webhook", "list", ns)
        assert stack.manage_json("pmem_webhook", "delete", str(only["id"])) == {
            "id": only["id"], "deleted": True}
        listed = [json.loads(line) for line in
                  stack.manage("pmem_webhook", "list", ns).strip().splitlines()]
        assert [e["id"] for e in listed] == [made["id"]]
        before = len(accepts.all())
        remember(http, ns, {"later": "1"})
        wait_for(lambda: receiver.first_seen()[-1].event["key"] == "later", 60,
                 "the next delivery")
        assert len(accepts.all()) == before  # nothing more to the deleted endpoint


def test_webhook_targets_are_checked_when_made(stack):
    ns, _ = stack.namespace("refused")
    for url in ("http://127.0.0.1:9/hook", "http://10.0.0.1/hook", "http://169.254.169.254/"):
        with pytest.raises(AssertionError, match="PMEM_WEBHOOK_ALLOW_PRIVATE"):
            stack.manage("pmem_webhook", "create", ns, "--url", url,
                         PMEM_WEBHOOK_ALLOW_PRIVATE="0")
    with pytest.raises(AssertionError, match="--url"):
        stack.manage("pmem_webhook", "create", ns, "--url", "ftp://example.com/x")
    with pytest.raises(AssertionError, match="--ops"):
        stack.manage("pmem_webhook", "create", ns, "--url", "http://127.0.0.1:9/",
                     "--ops", "accept,nonsense")
    assert stack.manage("pmem_webhook", "list", ns).strip() == ""


# --- erase ------------------------------------------------------------------------------------


def test_an_erased_keys_events_leave_the_feed_and_the_outbox_and_one_erase_event_names_it(stack):
    ns, token = stack.namespace("erase")
    with client(stack, token) as http, WebhookReceiver() as receiver:
        made = stack.manage_json("pmem_webhook", "create", ns, "--url", receiver.url)
        receiver.answer(500)  # the key's events are still to deliver when it is erased
        remember(http, ns, {"ssn": "123-45"})
        remember(http, ns, {"ssn": "999-99", "keep": "yes"})
        wait_for(lambda: len(receiver.all()) >= 1, 60, "a failed delivery")

        assert http.delete(f"/api/v1/namespaces/{ns}/cells/ssn/").status_code == 204

        events = feed(http, ns)
        assert [(e["op"], e["key"]) for e in events] == [("accept", "keep"), ("erase", "ssn")]
        erase = events[-1]
        assert erase["value"] is None and erase["previous"] is None
        assert erase["cell_status"] == "empty"
        assert "123-45" not in json.dumps(events) and "999-99" not in json.dumps(events)
        streamed = read_stream(http, ns)
        assert [json.loads(f.data) for f in streamed.frames] == events

        receiver.answer(204)
        wait_for(lambda: len(receiver.first_seen()) >= 2, 60, "the deliveries after the erase")
        _check_deliveries(receiver, made["secret"], events, ns)
        assert not any("123-45" in r.body.decode() or "999-99" in r.body.decode()
                       for r in receiver.delivered())
