"""The MCP tools say what happened and take what the client takes: ``remember`` says when text
yielded no fact, ``recall`` answers compact text listing a contested fact's candidates, the
client's inputs are there, and an application token's session names its namespace."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from django.utils import timezone

from memory.models import Evidence, Namespace, Version
from pmem_client import Client
from tests.support.mcp import error_text, http_session, structured, text

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def test_remember_says_when_text_yielded_no_fact(api_url, mcp_url, agent):
    ns, token = agent()

    async def session() -> dict[str, Any]:
        async with http_session(mcp_url, token) as mcp:
            return structured(await mcp.call_tool("remember", {
                "text": "I moved to Lisbon last week"}))

    out = anyio.run(session)
    assert out["status"] == "committed" and out["operations"] == []
    assert out["facts_found"] == 0 and out["note"].startswith("No fact found")


def test_recall_is_compact_text_and_lists_a_contested_facts_candidates(api_url, mcp_url, agent):
    ns, token = agent()
    with Client(api_url, token) as api:
        api.remember(facts=[{"key": f"fact_{i}", "value": f"value {i}"} for i in range(5)])
        api.remember(facts=[{"key": "alice_employer", "value": "Acme"}])
        api.contest("alice_employer", "Globex", reason="a second report")
        as_json = api.recall("alice employer", k=6)

    async def session() -> tuple[str, dict[str, Any]]:
        async with http_session(mcp_url, token) as mcp:
            result = await mcp.call_tool("recall", {"query": "alice employer", "k": 6})
            return text(result), result.structured_content

    answer, data = anyio.run(session)
    # For programs: the same context, and items that say which fact each line is.
    assert data["context"] == answer and len(data["items"]) == 6
    assert all("line" not in i and {"key", "value", "score"} <= set(i) for i in data["items"])
    assert "alice_employer = Acme (contested); alternatives: Globex" in answer.splitlines()
    assert answer.count("= value ") == 5 and "{" not in answer  # lines, no JSON
    assert len(answer) < len(as_json.context) + 40  # the context once, items not repeated


def test_recall_in_evidence_names_a_sessions_turn_by_its_number(api_url, mcp_url, agent):
    ns, token = agent()
    with Client(api_url, token) as api:
        api.remember(messages=[
            {"role": "user", "content": "We adopted a grey cat called Pixel."},
            {"role": "assistant", "content": "Lovely! How old is she?"},
            {"role": "user", "content": "Two years. I also started learning the cello."}])

    async def session() -> tuple[str, dict[str, Any]]:
        async with http_session(mcp_url, token) as mcp:
            result = await mcp.call_tool("recall", {"query": "what instrument is the user "
                                                    "learning? cello", "mode": "evidence",
                                                    "k": 1})
            return text(result), result.structured_content

    answer, data = anyio.run(session)
    (item,) = data["items"]
    assert [m["index"] for m in item["messages"]] == [3] and "score" in item["messages"][0]
    assert "[3] user: Two years. I also started learning the cello." in answer.splitlines()
    assert "Pixel" not in answer  # the turn, not the session


def test_the_clients_inputs_are_tool_inputs(api_url, mcp_url, agent):
    ns, token = agent(client="robot")
    before = timezone.now()

    async def session() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with http_session(mcp_url, token) as mcp:
            tools = {t.name: t.input_schema["properties"] for t in (await mcp.list_tools()).tools}
            out["inputs"] = {name: set(props) for name, props in tools.items()}
            call = mcp.call_tool
            out["tagged"] = structured(await call("remember", {"facts": [
                {"key": "alice_food", "value": "sushi", "metadata": {"user": "alice"}},
                {"key": "bob_food", "value": "pizza", "metadata": {"user": "bob"}}]}))
            out["late"] = structured(await call("remember", {
                "facts": [{"key": "alice_food", "value": "tofu"}],
                "observed_at": "2020-01-01T00:00:00+00:00"}))
            out["forced"] = structured(await call("remember", {"facts": [
                {"key": "bob_food", "value": "pasta", "op": "accept", "reason": "he said",
                 "hard_commit": True}]}))
            out["annotated"] = structured(await call("remember", {"facts": [
                {"key": "bob_drink", "value": "tea", "annotate": True}]}))
            out["session"] = structured(await call("remember", {"messages": [
                {"role": "user", "name": "Bob", "content": "bob_pet: cat",
                 "at": "2023-05-08T13:56:00Z"}, {"role": "assistant", "content": "ok"}]}))
            out["filtered"] = text(await call("recall", {"query": "food",
                                                         "filter": {"user": "alice"}}))
            out["cut"] = text(await call("recall", {"query": "food", "min_score": 1.9}))
            out["disclosed"] = text(await call("recall", {"query": "bob food",
                                                          "disclose": ["history"]}))
            out["search"] = structured(await call("fact_history", {"key": "bob_food",
                                                                   "search": "pizza"}))
            out["past"] = structured(await call("fact_history", {
                "key": "bob_food", "as_of": before.isoformat()}))
        return out

    out = anyio.run(session)
    assert {"observed_at", "messages"} <= out["inputs"]["remember"]
    session = Evidence.objects.get(pk=out["session"]["id"])
    assert session.messages[0] == {"role": "user", "name": "Bob", "content": "bob_pet: cat",
                                   "at": "2023-05-08T13:56:00Z"}
    assert session.text.startswith("[1, 2023-05-08 13:56 UTC] Bob: bob_pet: cat")
    assert [(o["key"], o["value"]) for o in out["session"]["operations"]] == [("bob_pet", "cat")]
    assert {"disclose", "filter", "min_score", "as_of"} <= out["inputs"]["recall"]
    assert {"as_of", "search", "before"} <= out["inputs"]["fact_history"]
    assert out["late"]["operations"][0]["status"] == "superseded"  # into the history
    assert out["forced"]["operations"][0]["op"] == "accept"
    # a fact's request for the model passes through (no model here: a create all the same)
    assert Evidence.objects.get(pk=out["annotated"]["id"]).facts == [
        {"key": "bob_drink", "value": "tea", "hard_commit": False, "annotate": True}]
    assert out["filtered"].splitlines()[1:] == ["alice_food = sushi"]
    assert out["cut"].splitlines()[1:2] == [] or "below min_score" in out["cut"]
    assert "history: pizza (superseded)" in out["disclosed"]
    assert [h["value"] for h in out["search"]["results"]] == ["pizza"]
    assert out["past"]["results"] == [] and out["past"]["total"] == 0
    assert Version.objects.get(namespace=ns, value="sushi").metadata == {"user": "alice"}
    with Client(api_url, token) as api:
        forced = next(o for o in api.operations(key="bob_food") if o.value == "pasta")
        assert (forced.reason, forced.actor) == ("he said", "mcp:robot")


def test_an_application_token_serves_each_users_namespace_by_header(api_url, mcp_url, db):
    from memory.services import token_create

    app = token_create(namespace_prefix="chat-", client="chat", scope="write").key

    async def session() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with http_session(mcp_url, app, namespace="chat-alice") as alice, \
                http_session(mcp_url, app, namespace="chat-bob") as bob, \
                http_session(mcp_url, app) as nobody, \
                http_session(mcp_url, app, namespace="other-carol") as outside:
            await alice.call_tool("remember", {"facts": [{"key": "food", "value": "sushi"}]})
            await bob.call_tool("remember", {"facts": [{"key": "food", "value": "pizza"}]})
            out["alice"] = structured(await alice.call_tool("get_fact", {"key": "food"}))
            out["bob_reads"] = text(await bob.call_tool("recall", {"query": "food"}))
            out["unnamed"] = error_text(await nobody.call_tool("get_fact", {"key": "food"}))
            out["outside"] = error_text(await outside.call_tool("remember", {
                "facts": [{"key": "food", "value": "tacos"}]}))
        return out

    out = anyio.run(session)
    assert out["alice"]["value"] == "sushi"
    assert "pizza" in out["bob_reads"] and "sushi" not in out["bob_reads"]
    assert "chat-" in out["unnamed"] and "name one" in out["unnamed"]
    assert out["outside"] == "no such namespace"
    assert not Namespace.objects.filter(name="other-carol").exists()
    assert set(Evidence.objects.filter(namespace__name__startswith="chat-")
               .values_list("namespace__name", flat=True)) == {"chat-alice", "chat-bob"}
