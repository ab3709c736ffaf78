"""Sessions and batches through pmem_client against the live API: ``remember(messages=…)``
records a chat session as one observation, ``remember_many`` stores a long list in order
through chunked batch requests, each item once however often it is sent."""

from __future__ import annotations

import json

import anyio
import pytest

import pmem_client
from memory.models import Evidence
from pmem_client import AsyncClient, Client
from pmem_client import _batch as p

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

SESSION = [{"role": "user", "name": "Ann", "content": "home_city: Lisbon",
            "at": "2023-05-08T13:56:00+01:00"},
           {"role": "assistant", "content": "Noted."}]


def test_remember_takes_a_session(api_url, agent):
    ns, token = agent()
    with Client(api_url, token) as memory:
        seen = memory.remember(messages=SESSION)
        assert seen.status == "committed"
        assert seen.text == ("[1, 2023-05-08 12:56 UTC] Ann: home_city: Lisbon\n"
                             "[2] assistant: Noted.")
        assert seen.messages[0]["at"] == "2023-05-08T12:56:00Z"
        assert [(o.key, o.value) for o in seen.operations] == [("home_city", "Lisbon")]


def test_remember_many_stores_a_long_list_in_order_in_chunks(api_url, agent):
    ns, token = agent()
    items = [{"facts": [{"key": "counter", "value": str(i)}]} for i in range(1500)]
    with Client(api_url, token) as memory:
        results = memory.remember_many(items)
        assert len(results) == 1500 and {r.status for r in results} == {"committed"}
        seqs = [r.seq for r in results]
        assert seqs == sorted(seqs) and len(set(seqs)) == 1500
        assert memory.get_fact("counter").value == "1499"
        with pytest.raises(pmem_client.BadRequest) as refused:
            memory.remember_many([{"text": "fine"}, {"facts": [{"key": "", "value": "x"}]}])
        assert "observations[1].facts[0].key" in str(refused.value)
    assert Evidence.objects.filter(namespace=ns).count() == 1500


def test_a_resent_list_with_its_keys_stores_nothing_twice(api_url, agent):
    ns, token = agent()
    items = [{"text": f"note {i}", "idempotency_key": f"n{i}"} for i in range(5)]
    with Client(api_url, token) as memory:
        first = memory.remember_many(items, wait=False)
        again = memory.remember_many(items)
    assert [r.id for r in again] == [r.id for r in first]
    assert all(r.replayed for r in again) and not any(r.replayed for r in first)
    assert Evidence.objects.filter(namespace=ns).count() == 5


def test_chunks_keep_order_and_stay_under_the_limits():
    items = [p.batch_item({"text": "x" * 1000}) for i in range(2500)]
    chunks = p.batches(items)
    assert [item for chunk in chunks for item in chunk] == items
    assert all(len(c) <= p.BATCH_ITEMS for c in chunks)
    assert all(len(json.dumps({"observations": c})) < 1_000_000 for c in chunks)
    assert len(chunks) < 5
    small = [p.batch_item({"text": "x"}) for _ in range(1500)]
    assert [len(c) for c in p.batches(small)] == [1000, 500]  # at most 1,000 a request
    assert all(i["idempotency_key"] for i in items)


def test_async_client_takes_sessions_and_batches(api_url, agent):
    ns, token = agent(client="async")

    async def session() -> tuple:
        async with AsyncClient(api_url, token) as memory:
            one = await memory.remember(messages=SESSION)
            many = await memory.remember_many([{"messages": SESSION}, {"text": "a: b"}])
            return one, many

    one, many = anyio.run(session)
    assert one.messages is not None and one.status == "committed"
    assert [r.status for r in many] == ["committed", "committed"]
    assert many[1].seq == many[0].seq + 1
