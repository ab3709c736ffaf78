"""Reads see what was acknowledged (SPEC §11.1, CONTRACT "Reads see what was acknowledged"),
with the embedding deferred past the commit as production runs it: the semantic embedder, the
background embedder thread on (``PMEM_EMBED_ASYNC``), and every read made at once after the
write was answered — no sleep, no waiting for the background pass."""

from __future__ import annotations

import itertools
import string
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from memory.domain.render import embedding_text
from memory.models import Cell
from memory.services import namespace_create, token_create
from pmem_client import Client
from pmem_client.langgraph import PMemStore

pytestmark = pytest.mark.django_db(transaction=True)

READ_MODES = ("frontier", "frontier_cosine", "raw", "raw_ordered")
_names = itertools.count(1)


@pytest.fixture
def deferred(settings) -> None:
    """The production embedding path: MiniLM after the commit, on the background thread."""
    settings.PMEM_EMBEDDER = "minilm"
    settings.PMEM_EMBED_ASYNC = True


def _post(http: httpx.Client, url: str, body: dict[str, Any]) -> dict[str, Any]:
    answer = http.post(url, json=body)
    assert answer.status_code in (200, 201), answer.text
    return answer.json()


def test_recall_right_after_remember_holds_the_fact(live_server, deferred):
    ns = namespace_create(name="ryw-readme")
    token = token_create(namespace=ns, client="agent").key
    with Client(live_server.url, token) as memory:
        memory.remember(facts=[{"key": "user_city", "value": "Lisbon"}])
        read = memory.recall("where do I live?")
        assert [i["key"] for i in read.items] == ["user_city"], read
        assert "user_city = Lisbon" in read.context
        # The background pass has not run yet: the read embedded what it needed itself.
        assert Cell.objects.get(namespace=ns, key="user_city").embedding is not None
        assert memory.get_fact("user_city").value == "Lisbon"
        assert [c.key for c in memory.cells()] == ["user_city"]


def test_the_langgraph_store_finds_what_it_just_put(live_server, deferred):
    ns = namespace_create(name="ryw-graph")
    token = token_create(namespace=ns, client="graph").key
    with PMemStore(live_server.url, token) as store:
        store.put(("memories", "alice"), "home", {"content": "lives in Porto by the river"})
        found = store.search(("memories", "alice"), query="where does alice live?")
        assert [item.key for item in found] == ["home"]


SESSION = [("Caroline", "Hey Mel! How was your week?"),
           ("Melanie", "Busy with the kids. We went swimming on Sunday."),
           ("Caroline", "My friends gave me a hand-painted bowl from Zanzibar."),
           ("Melanie", "What a lovely present!")]


def test_an_evidence_read_right_after_a_session_names_its_turn(live_server, deferred):
    """A chat session committed (``remember`` returned) is read at once in ``evidence``, its
    turn named, while its messages' vectors are still the background embedder's to make."""
    ns = namespace_create(name="ryw-session")
    token = token_create(namespace=ns, client="chat").key
    with Client(live_server.url, token) as memory:
        memory.remember(messages=[{"role": "user", "name": who, "content": text}
                                  for who, text in SESSION])
        read = memory.recall("where is the bowl from?", mode="evidence", k=1)
        (item,) = read.items
        assert [m["index"] for m in item["messages"]] == [3], read
        assert item["messages"][0]["content"] == SESSION[2][1]
        assert read.context.splitlines()[1:] == [item["messages"][0]["line"]]


_word = st.text(string.ascii_lowercase, min_size=3, max_size=8)
_facts = st.lists(st.tuples(_word, _word, st.sampled_from(["alice", "bob"])),
                  min_size=1, max_size=4, unique_by=lambda f: f[0])


@given(writes=_facts)
@hsettings(max_examples=6, deadline=None,
           suppress_health_check=[HealthCheck.function_scoped_fixture,
                                  HealthCheck.too_slow])
def test_every_read_right_after_acknowledged_writes_includes_them(live_server, deferred,
                                                                   writes):
    ns = namespace_create(name=f"ryw-prop-{next(_names)}")
    token = token_create(namespace=ns, client="prop").key
    base = f"{live_server.url}/api/v1/namespaces/{ns.name}"
    with httpx.Client(headers={"Authorization": f"Token {token}"}, timeout=60) as http:
        for key, value, user in writes:
            _post(http, f"{base}/observations/?wait=1", {"facts": [
                {"key": f"k_{key}", "value": value, "metadata": {"user": user}}]})
        n = len(writes)
        for key, value, user in writes:
            text = embedding_text(f"k_{key}", value)
            for mode in READ_MODES:
                read = _post(http, f"{base}/read/", {"query": text, "mode": mode, "k": n})
                shown = ([i["key"] for i in read["items"]] if mode.startswith("frontier")
                         else [i["text"] for i in read["items"]])
                assert len(shown) == n, (mode, read)
                cut = _post(http, f"{base}/read/", {"query": text, "mode": mode, "k": n,
                                                    "min_score": 0.99})
                assert cut["items"], (mode, "min_score", read)
            for mode in ("frontier", "frontier_cosine"):
                filtered = _post(http, f"{base}/read/", {
                    "query": text, "mode": mode, "k": n, "filter": {"user": user}})
                assert f"k_{key}" in [i["key"] for i in filtered["items"]], (mode, filtered)
            fact = http.get(f"{base}/cells/k_{key}/")
            assert fact.status_code == 200 and fact.json()["value"] == value
        listed = http.get(f"{base}/cells/").json()["results"]
        assert sorted(c["key"] for c in listed) == sorted(f"k_{k}" for k, _, _ in writes)
