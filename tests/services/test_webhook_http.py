"""One webhook POST against a real local HTTP server: the address checked is the address
connected to, redirects are not followed, timeouts end the attempt, refusals name the reason."""

from __future__ import annotations

import socket
import threading

import pytest

from memory.domain.webhooks import TargetRefused, parse_target
from memory.services.webhook_http import check_url, checked_addresses, post
from tests.support.webhook_receiver import WebhookReceiver

HEADERS = {"content-type": "application/json", "webhook-id": "evt_1_1"}


def _post(url: str, *, allow_private: bool = True, timeout: float = 1.0):
    return post(url, b"{}", HEADERS, allow_private=allow_private, connect_timeout=timeout,
                timeout=timeout)


def test_a_2xx_is_delivered_and_the_body_and_headers_arrive() -> None:
    with WebhookReceiver() as r:
        answer = _post(r.url)
        assert answer.ok and answer.status == 204
        (got,) = r.all()
        assert got.body == b"{}" and got.headers["webhook-id"] == "evt_1_1"


def test_an_error_status_a_redirect_and_a_slow_answer_are_failures() -> None:
    with WebhookReceiver() as r:
        r.answer(500)
        assert (_post(r.url).outcome, _post(r.url).status) == ("failed", 500)
        r.answer(307)
        assert _post(r.url).outcome == "failed"  # never followed
        r.answer(204)
        r.delay(2.5)
        assert _post(r.url, timeout=0.5).outcome == "timeout"


def test_nothing_listening_is_unreachable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    answer = _post(f"http://127.0.0.1:{port}/")
    assert answer.outcome == "unreachable" and "Refused" in answer.error


def test_a_server_that_never_answers_times_out_within_the_total() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    held: list[socket.socket] = []
    thread = threading.Thread(target=lambda: held.append(server.accept()[0]), daemon=True)
    thread.start()
    try:
        answer = _post(f"http://127.0.0.1:{server.getsockname()[1]}/", timeout=0.5)
        assert answer.outcome == "timeout"
    finally:
        for s in held:
            s.close()
        server.close()


def test_loopback_is_refused_unless_private_targets_are_allowed() -> None:
    with WebhookReceiver() as r:
        answer = _post(r.url, allow_private=False)
        assert answer.outcome == "refused" and "loopback" in answer.error
        assert r.all() == []
    with pytest.raises(TargetRefused, match="loopback"):
        check_url("http://localhost:8000/", allow_private=False)
    with pytest.raises(TargetRefused, match="PMEM_WEBHOOK_ALLOW_PRIVATE"):
        check_url("http://[::ffff:127.0.0.1]/", allow_private=False)


def test_a_name_that_does_not_resolve_is_refused() -> None:
    with pytest.raises(TargetRefused, match="does not resolve"):
        checked_addresses(parse_target("http://no-such-host.invalid/"), allow_private=True)
