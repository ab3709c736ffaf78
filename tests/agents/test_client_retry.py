"""pmem_client's retries against a real HTTP server in front of the live API that answers 503,
loses answers and stalls (tests/support/flaky_proxy.py): a retried call is applied once."""

from __future__ import annotations

import pytest

import pmem_client
from memory.models import Evidence
from pmem_client import Client, Retry
from tests.support.flaky_proxy import FlakyProxy

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]
FAST = Retry(attempts=4, backoff=0.05, max_backoff=0.2)


def _observation_posts(proxy: FlakyProxy) -> list[tuple[float, str, str, int]]:
    return proxy.requests("POST", "/observations/")


def test_a_503_is_retried_and_the_observation_stored_once(api_url, agent):
    ns, token = agent()
    with FlakyProxy(api_url) as proxy, Client(proxy.url, token, retry=FAST) as memory:
        memory.whoami()  # the namespace is known: the fault hits the write
        proxy.refuse(503)
        seen = memory.remember(facts=[{"key": "mug_1_location", "value": "shelf 2"}])
        assert seen.status == "committed"
        assert [status for *_, status in _observation_posts(proxy)] == [503, 201]
    assert Evidence.objects.filter(namespace=ns).count() == 1


def test_retry_after_is_honoured(api_url, agent):
    ns, token = agent()
    with FlakyProxy(api_url) as proxy, Client(proxy.url, token, retry=FAST) as memory:
        memory.whoami()
        proxy.refuse(503, retry_after="1")
        memory.remember(facts=[{"key": "lamp", "value": "on"}])
        (first, *_), (second, *_) = _observation_posts(proxy)
        # The backoff alone would have waited at most 0.05 s.
        assert second - first >= 0.95


def test_a_lost_answer_is_replayed_not_written_twice(api_url, agent):
    ns, token = agent()
    with FlakyProxy(api_url) as proxy, Client(proxy.url, token, retry=FAST) as memory:
        memory.whoami()
        proxy.lose_answer(503)  # the API stored it; the client only sees a 503
        seen = memory.remember(facts=[{"key": "alice_employer", "value": "Acme"}])
        assert seen.status == "committed"
        assert [status for *_, status in _observation_posts(proxy)] == [503, 201]
    stored = Evidence.objects.filter(namespace=ns)
    assert stored.count() == 1 and stored.get().id == seen.id


def test_a_timeout_is_retried_and_the_late_request_not_written_twice(api_url, agent):
    ns, token = agent()
    proxy = FlakyProxy(api_url)
    with proxy, Client(proxy.url, token, retry=FAST, timeout=1.0) as memory:
        memory.whoami()
        proxy.stall(3.0)  # the first try reaches the API after the client gave up on it
        seen = memory.remember(facts=[{"key": "door", "value": "open"}], wait=False)
        assert seen.id
    # Leaving the proxy waited for the stalled request: it has reached the API by now.
    assert len(_observation_posts(proxy)) == 2
    assert Evidence.objects.filter(namespace=ns).count() == 1


def test_the_same_idempotency_key_twice_stores_one_observation(api_url, agent):
    ns, token = agent()
    with Client(api_url, token) as memory:
        first = memory.remember(facts=[{"key": "oven", "value": "on"}], idempotency_key="k-1")
        again = memory.remember(facts=[{"key": "oven", "value": "on"}], idempotency_key="k-1",
                                wait=False)
        assert again.id == first.id and again.replayed
        other = memory.remember(facts=[{"key": "oven", "value": "on"}])
        assert other.id != first.id
    assert Evidence.objects.filter(namespace=ns).count() == 2


def test_retries_give_up_with_the_error_of_the_last_answer(api_url, agent):
    ns, token = agent()
    with FlakyProxy(api_url) as proxy, \
            Client(proxy.url, token, retry=Retry(attempts=2, backoff=0.01)) as memory:
        memory.whoami()
        proxy.refuse(503, times=2)
        with pytest.raises(pmem_client.ServerError) as failed:
            memory.remember(facts=[{"key": "x", "value": "1"}])
        assert failed.value.status == 503
        proxy.refuse(429, retry_after="0", times=2)
        with pytest.raises(pmem_client.RateLimited) as limited:
            memory.recall("x")
        assert limited.value.retry_after == 0.0
    assert not Evidence.objects.filter(namespace=ns).exists()


def test_an_unreachable_server_raises_transport_error():
    with Client("http://127.0.0.1:9", "token", retry=Retry(attempts=2, backoff=0.01)) as memory, \
            pytest.raises(pmem_client.TransportError):
        memory.whoami()


def test_as_of_is_passed_to_the_api_as_an_instant(api_url, agent):
    from datetime import UTC, datetime
    from urllib.parse import parse_qs, urlsplit

    ns, token = agent()
    with FlakyProxy(api_url) as proxy, Client(proxy.url, token) as memory:
        memory.remember(facts=[{"key": "lamp", "value": "on"}])
        when = datetime(2099, 1, 2, 3, 4, 5, tzinfo=UTC)  # after the write: the lamp was on
        assert memory.get_fact("lamp", as_of=when).value == "on"
        asked = proxy.requests("GET", "/cells/lamp/")[-1][2]
        assert parse_qs(urlsplit(asked).query)["as_of"] == ["2099-01-02T03:04:05+00:00"]
        before = datetime(2000, 1, 2, tzinfo=UTC)  # before the namespace: the empty memory
        assert memory.get_fact("lamp", as_of=before).status == "empty"
        with pytest.raises(ValueError, match="time zone"):
            memory.get_fact("lamp", as_of=datetime(2026, 1, 2))
