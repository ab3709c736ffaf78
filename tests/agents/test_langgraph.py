"""``pmem_client.langgraph.PMemStore`` against the live API: LangGraph's ``BaseStore``
operations as LangGraph defines them, and a LangGraph agent (``create_react_agent``, a scripted
chat model in place of an LLM) keeping its memories with LangMem's tools — remember, correct,
forget — whose history and past P-Mem still answers."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import anyio
import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.prebuilt import create_react_agent
from langgraph.store.base import BaseStore
from langmem import create_manage_memory_tool, create_search_memory_tool

from memory.models import Namespace, Version
from pmem_client.langgraph import PMemStore, pmem_key

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

MEMORIES = ("memories", "alice")


@pytest.fixture
def store(api_url, agent) -> Any:
    ns, token = agent(client="graph")
    with PMemStore(api_url, token) as made:
        made.ns = ns
        yield made


def test_put_get_and_a_changed_value_superseding(store):
    assert isinstance(store, BaseStore)
    assert store.get(MEMORIES, "food") is None
    store.put(MEMORIES, "food", {"content": "likes sushi", "turn": 1})
    item = store.get(MEMORIES, "food")
    assert (item.namespace, item.key, item.value) == (MEMORIES, "food",
                                                      {"content": "likes sushi", "turn": 1})
    assert item.created_at <= item.updated_at
    store.put(MEMORIES, "food", {"turn": 1, "content": "likes sushi"})  # the same value
    store.put(MEMORIES, "food", {"content": "likes ramen", "turn": 2})
    assert store.get(MEMORIES, "food").value == {"content": "likes ramen", "turn": 2}
    history = store.history(MEMORIES, "food")
    assert [(h["value"]["content"], h["status"], h["ordinal"]) for h in history] == [
        ("likes ramen", "active", 2), ("likes sushi", "superseded", 1)]
    # Another namespace, the same key: another item.
    assert store.get(("memories", "bob"), "food") is None
    assert Version.objects.filter(namespace=store.ns).count() == 2


def test_delete_retracts_every_value_and_keeps_them(store):
    for turn, food in enumerate(("sushi", "ramen", "tacos")):
        store.put(MEMORIES, "food", {"content": food, "turn": turn})
    store.delete(MEMORIES, "food")
    assert store.get(MEMORIES, "food") is None
    assert [h["status"] for h in store.history(MEMORIES, "food")] == ["revoked"] * 3
    assert store.search(MEMORIES) == []
    store.delete(MEMORIES, "food")  # nothing left: nothing happens
    store.delete(MEMORIES, "never")
    store.put(MEMORIES, "food", {"content": "pizza"})  # the key lives again
    assert store.get(MEMORIES, "food").value == {"content": "pizza"}
    assert len(store.history(MEMORIES, "food")) == 4


def test_keys_of_any_script_and_length_stay_apart(store):
    keys = ["Food", "food", "fo od", "食べ物", "x" * 400, str(uuid.uuid4())]
    for n, key in enumerate(keys):
        store.put(MEMORIES, key, {"n": n})
    assert [store.get(MEMORIES, k).value["n"] for k in keys] == list(range(len(keys)))
    assert len({pmem_key(MEMORIES, k) for k in keys}) == len(keys)
    assert all(len(pmem_key(MEMORIES, k)) <= 200 for k in keys)


def test_search_by_prefix_query_and_filter(store):
    store.put(("memories", "alice"), "1", {"content": "Alice likes sushi", "kind": "food",
                                           "stars": 5})
    store.put(("memories", "alice"), "2", {"content": "Alice has a cat", "kind": "pet",
                                           "stars": 3})
    store.put(("memories", "bob"), "3", {"content": "Bob likes pizza", "kind": "food",
                                         "stars": 4})
    store.put(("notes",), "4", {"content": "a note about food", "kind": "food"})
    everything = store.search(())
    assert {i.key for i in everything} == {"1", "2", "3", "4"}
    alice = store.search(("memories", "alice"))
    assert {i.key for i in alice} == {"1", "2"}
    assert all(i.namespace == ("memories", "alice") for i in alice)
    food = store.search(("memories",), filter={"kind": "food"})
    assert {i.key for i in food} == {"1", "3"}
    rated = store.search(("memories",), filter={"stars": {"$gte": 4}})
    assert {i.key for i in rated} == {"1", "3"}
    found = store.search(("memories",), query="who likes pizza", limit=1)
    assert [i.key for i in found] == ["3"] and found[0].score is not None
    ranked = store.search(("memories",), query="pizza", filter={"kind": "food"}, limit=5)
    assert ranked[0].key == "3" and {i.key for i in ranked} == {"1", "3"}
    paged = [store.search(("memories",), limit=1, offset=n)[0].key for n in range(3)]
    assert sorted(paged) == ["1", "2", "3"]


def test_values_too_large_for_metadata_are_still_found_by_value(store):
    wide = {f"field_{n:02d}": n for n in range(40)}  # more fields than metadata holds
    store.put(MEMORIES, "wide", {**wide, "kind": "food"})
    store.put(MEMORIES, "narrow", {"kind": "food"})
    assert {i.key for i in store.search(MEMORIES, filter={"kind": "food"})} == {"wide",
                                                                               "narrow"}
    assert [i.key for i in store.search(MEMORIES, filter={"field_39": 39})] == ["wide"]


def test_list_namespaces(store):
    for namespace in (("memories", "alice"), ("memories", "bob"), ("memories", "bob", "pets"),
                      ("notes",)):
        store.put(namespace, "k", {"v": 1})
    assert store.list_namespaces() == [("memories", "alice"), ("memories", "bob"),
                                       ("memories", "bob", "pets"), ("notes",)]
    assert store.list_namespaces(prefix=("memories",), max_depth=2) == [
        ("memories", "alice"), ("memories", "bob")]
    assert store.list_namespaces(suffix=("pets",)) == [("memories", "bob", "pets")]
    assert store.list_namespaces(prefix=("memories", "*", "pets")) == [
        ("memories", "bob", "pets")]
    store.delete(("notes",), "k")
    assert ("notes",) not in store.list_namespaces()


def test_the_async_api_does_the_same(store):
    async def session() -> tuple[Any, list[Any]]:
        await store.aput(MEMORIES, "mood", {"content": "calm"})
        await store.aput(MEMORIES, "mood", {"content": "happy"})
        got = await store.aget(MEMORIES, "mood")
        found = await store.asearch(MEMORIES, query="mood")
        await store.adelete(MEMORIES, "mood")
        return got, found

    got, found = anyio.run(session)
    assert got.value == {"content": "happy"} and [i.key for i in found] == ["mood"]
    assert store.get(MEMORIES, "mood") is None


def test_an_application_token_gives_each_user_their_own_namespace(api_url, db):
    from memory.services import token_create

    app = token_create(namespace_prefix="lg-", client="graph-app", scope="write").key
    with PMemStore(api_url, app, namespace=lambda ns: f"lg-{ns[1]}") as store:
        assert store.search(("memories", "alice")) == []  # not written yet: empty
        store.put(("memories", "alice"), "food", {"content": "sushi"})
        store.put(("memories", "bob"), "food", {"content": "pizza"})
        assert store.get(("memories", "alice"), "food").value == {"content": "sushi"}
        assert [i.value for i in store.search(("memories", "bob"), query="food")] == [
            {"content": "pizza"}]
        with pytest.raises(ValueError, match="prefix"):
            store.search(("memories",))  # which user's? the function cannot say
    assert set(Namespace.objects.filter(name__startswith="lg-").values_list(
        "name", flat=True)) == {"lg-alice", "lg-bob"}


# --- a LangGraph agent with LangMem's memory tools ------------------------------------------------

Step = Callable[[list[BaseMessage]], AIMessage]


class ScriptedChat(BaseChatModel):
    """A chat model that answers each turn with the next step of a script (a function of the
    conversation so far), so an agent runs without a model server."""

    steps: list[Any]

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChat:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        message = self.steps.pop(0)(messages)
        return ChatResult(generations=[ChatGeneration(message=message)])


def call(name: str, **args: Any) -> Step:
    return lambda _: AIMessage(content="", tool_calls=[
        {"name": name, "args": args, "id": f"call_{uuid.uuid4().hex[:8]}"}])


def call_on_memory(name: str, **args: Any) -> Step:
    """A tool call naming the memory the last tool answer mentioned (its id)."""
    def step(messages: list[BaseMessage]) -> AIMessage:
        last = next(m for m in reversed(messages) if isinstance(m, ToolMessage))
        memory_id = re.search(r"[0-9a-f]{8}-[0-9a-f-]{27}", str(last.content)).group(0)
        return call(name, id=memory_id, **args)(messages)
    return step


def say(text: str) -> Step:
    return lambda _: AIMessage(content=text)


def test_a_react_agent_remembers_corrects_and_forgets_with_langmem(api_url, agent):
    ns, token = agent(client="langmem")
    store = PMemStore(api_url, token)
    namespace = ("memories", "{langgraph_user_id}")
    model = ScriptedChat(steps=[
        call("manage_memory", content="Alice lives in Paris", action="create"),
        say("I'll remember that you live in Paris."),
        call("search_memory", query="where does Alice live"),
        call_on_memory("manage_memory", content="Alice lives in Lisbon", action="update"),
        say("Updated: Lisbon."),
        call("search_memory", query="where does Alice live"),
        call_on_memory("manage_memory", action="delete"),
        say("Forgotten."),
    ])
    graph = create_react_agent(model, tools=[create_manage_memory_tool(namespace=namespace),
                                             create_search_memory_tool(namespace=namespace)],
                               store=store)
    config = {"configurable": {"langgraph_user_id": "alice"}}
    moments = []
    for said in ("I live in Paris.", "Actually I moved to Lisbon.", "Forget where I live."):
        answer = graph.invoke({"messages": [HumanMessage(said)]}, config)
        moments.append(datetime.now(UTC))
        time.sleep(0.01)
    assert answer["messages"][-1].content == "Forgotten." and not model.steps
    assert store.search(("memories", "alice"), query="where does Alice live") == []
    key = _only_key(ns)
    history = store.history(("memories", "alice"), key)
    assert [(h["value"]["content"], h["status"]) for h in history] == [
        ("Alice lives in Lisbon", "revoked"), ("Alice lives in Paris", "revoked")]
    then = [store.get(("memories", "alice"), key, as_of=t) for t in moments]
    assert [i.value["content"] if i else None for i in then] == [
        "Alice lives in Paris", "Alice lives in Lisbon", None]
    log = [(o.op, o.reason) for o in store.client.operations()]
    assert ("revoke", "deleted through the LangGraph store") in log
    store.close()


def _only_key(ns: Any) -> str:
    """The LangGraph key of the one item the agent wrote (its memory id)."""
    metadata = Version.objects.filter(namespace=ns).values_list("metadata", flat=True).first()
    return metadata["langgraph.key"]


def test_a_ttl_ends_the_item_and_a_read_refreshes_it(store):
    from datetime import timedelta

    from django.utils import timezone

    assert store.supports_ttl
    store.put(MEMORIES, "trip", {"content": "in Rome"}, ttl=60)  # minutes
    first = Version.objects.get(namespace=store.ns)
    assert first.expires_at is not None
    assert abs((first.expires_at - first.created_at) - timedelta(minutes=60)) < timedelta(seconds=5)
    # A read with refresh_ttl moves the expiry (the value sent again supports itself).
    Version.objects.filter(pk=first.pk).update(
        expires_at=timezone.now() + timedelta(minutes=5))
    assert store.get(MEMORIES, "trip", refresh_ttl=False).value == {"content": "in Rome"}
    assert Version.objects.get(pk=first.pk).expires_at < timezone.now() + timedelta(minutes=6)
    assert store.get(MEMORIES, "trip").value == {"content": "in Rome"}  # refreshes by default
    moved = Version.objects.get(pk=first.pk)
    assert moved.expires_at > timezone.now() + timedelta(minutes=55)
    assert Version.objects.filter(namespace=store.ns).count() == 1  # no new version
    # Past the instant the item is gone from get and search; its history says expired.
    Version.objects.filter(pk=first.pk).update(
        expires_at=moved.created_at + timedelta(milliseconds=1))
    assert store.get(MEMORIES, "trip") is None
    assert store.search(MEMORIES, query="Rome") == []
    assert [h["status"] for h in store.history(MEMORIES, "trip")] == ["expired"]
