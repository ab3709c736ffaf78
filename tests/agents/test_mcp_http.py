"""The MCP server over streamable HTTP, as ``make run`` starts it, driven by the official SDK's
``ClientSession``; what the tools did is checked through the API afterwards."""

from __future__ import annotations

from typing import Any

import anyio
import httpx2
import pytest

from memory.models import Evidence
from pmem_client import Client
from tests.support.mcp import error_text, http_session, structured, text

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

TOOLS = {"remember", "recall", "get_fact", "fact_history", "retract", "contest", "resolve",
         "observation_status"}


def test_lists_the_tools_resources_and_prompt(api_url, mcp_url, agent):
    ns, token = agent()

    async def listing() -> dict[str, Any]:
        async with http_session(mcp_url, token) as mcp:
            tools = (await mcp.list_tools()).tools
            return {"tools": {t.name: t for t in tools},
                    "resources": [str(r.uri) for r in (await mcp.list_resources()).resources],
                    "templates": [t.uri_template for t in
                                  (await mcp.list_resource_templates()).resource_templates],
                    "prompts": [p.name for p in (await mcp.list_prompts()).prompts],
                    "prompt": (await mcp.get_prompt("use_memory")).messages[0].content.text}

    out = anyio.run(listing)
    assert set(out["tools"]) == TOOLS
    retract = out["tools"]["retract"]
    assert "reinstated" in retract.description
    assert set(retract.input_schema["required"]) == {"key", "reason"}
    assert "contested" in out["tools"]["contest"].description
    assert out["resources"] == ["pmem://frontier"]
    assert out["templates"] == ["pmem://cells/{key}"]
    assert out["prompts"] == ["use_memory"] and "retract" in out["prompt"]


def test_every_tool_acts_on_the_tokens_memory(api_url, mcp_url, agent):
    ns, token = agent(client="robot")

    async def session() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with http_session(mcp_url, token) as mcp:
            call = mcp.call_tool
            out["remember"] = structured(await call("remember", {"facts": [
                {"key": "mug_1_location", "value": "table 1"}]}))
            await call("remember", {"text": "Update: mug 1 has been moved from table 1 to "
                                             "shelf 2."})
            out["recall"] = text(await call("recall", {"query": "where is mug 1?"}))
            out["get_fact"] = structured(await call("get_fact", {"key": "mug_1_location"}))
            out["history"] = structured(await call("fact_history", {"key": "mug_1_location"}))
            out["retract"] = structured(await call("retract", {
                "key": "mug_1_location", "reason": "the camera misread the shelf"}))
            await call("remember", {"facts": [{"key": "alice_employer", "value": "Acme"}]})
            out["contest"] = structured(await call("contest", {
                "key": "alice_employer", "value": "Globex", "reason": "a second report"}))
            out["resolve"] = structured(await call("resolve", {
                "key": "alice_employer", "value": "Globex", "reason": "HR confirmed"}))
            queued = structured(await call("remember", {
                "facts": [{"key": "door", "value": "open"}], "wait": False}))
            out["status"] = structured(await call("observation_status", {"id": queued["id"]}))
            out["frontier"] = (await mcp.read_resource("pmem://frontier")).contents[0].text
            out["cell"] = (await mcp.read_resource("pmem://cells/alice_employer")
                           ).contents[0].text
        return out

    out = anyio.run(session)
    assert out["remember"]["status"] == "committed"
    assert [(o["op"], o["key"], o["value"]) for o in out["remember"]["operations"]] == [
        ("accept", "mug_1_location", "table 1")]
    assert "mug_1_location = shelf 2" in out["recall"]
    assert out["get_fact"]["value"] == "shelf 2"
    assert [h["value"] for h in out["history"]["results"]] == ["shelf 2", "table 1"]
    assert out["retract"]["cell"]["value"] == "table 1"
    assert out["retract"]["operation"]["actor"] == "mcp:robot"
    assert out["contest"]["cell"]["status"] == "contested"
    assert (out["resolve"]["cell"]["status"], out["resolve"]["cell"]["value"]) == (
        "active", "Globex")
    assert out["status"]["id"] and out["status"]["status"] in ("pending", "processing",
                                                               "committed")
    assert "mug_1_location = table 1" in out["frontier"]
    assert '"Globex"' in out["cell"]

    with Client(api_url, token) as api:  # what the tools did, seen through the API
        assert api.get_fact("mug_1_location").value == "table 1"
        assert api.get_fact("alice_employer").value == "Globex"
        signed = {(o.op, o.actor, o.reason) for o in api.operations()}
        assert ("revoke", "mcp:robot", "the camera misread the shelf") in signed
        assert ("contest", "mcp:robot", "a second report") in signed
        assert ("resolve", "mcp:robot", "HR confirmed") in signed


def test_a_refused_operation_is_a_tool_error_with_its_reason(api_url, mcp_url, agent):
    ns, token = agent()

    async def session() -> tuple[str, str, str]:
        async with http_session(mcp_url, token) as mcp:
            missing = error_text(await mcp.call_tool("retract", {"key": "never_written",
                                                                 "reason": "x"}))
            await mcp.call_tool("remember", {"facts": [{"key": "lamp", "value": "on"}]})
            uncontested = error_text(await mcp.call_tool("resolve", {
                "key": "lamp", "value": "off", "reason": "x"}))
            unknown = error_text(await mcp.call_tool("get_fact", {"key": "nothing_here"}))
            return missing, uncontested, unknown

    missing, uncontested, unknown = anyio.run(session)
    assert missing == ("no cell with key 'never_written': nothing to retract "
                       "(nothing was written)")
    with Client(api_url, token) as api:  # the reason is the one the memory recorded
        noop = next(o for o in api.operations(key="lamp") if o.op == "noop")
        assert uncontested == noop.reason and uncontested
        assert api.get_fact("lamp").value == "on"
    assert "nothing_here" in unknown


def test_remember_commits_in_arrival_order_with_the_apis_writes(api_url, mcp_url, agent):
    ns, token = agent()

    async def session(api: Client) -> None:
        async with http_session(mcp_url, token) as mcp:
            for i in range(6):
                if i % 2:
                    await mcp.call_tool("remember", {"facts": [{"key": "counter",
                                                                "value": f"v{i}"}],
                                                     "wait": False})
                else:
                    api.remember(facts=[{"key": "counter", "value": f"v{i}"}], wait=False)

    with Client(api_url, token) as api:
        anyio.run(session, api)
        from tests.support.worker import wait_until

        wait_until(lambda: not Evidence.objects.filter(
            namespace=ns, state__in=["pending", "processing"]).exists(), message="commits")
        assert [h.value for h in api.get_fact("counter").history] == [
            f"v{i}" for i in reversed(range(6))]
    seqs = list(Evidence.objects.filter(namespace=ns).order_by("id").values_list("seq", flat=True))
    assert seqs == sorted(seqs)


def test_two_namespaces_never_see_each_others_facts(api_url, mcp_url, agent):
    ns_a, token_a = agent("a")
    ns_b, token_b = agent("b")

    async def session() -> tuple[str, str, str]:
        async with http_session(mcp_url, token_a) as a, http_session(mcp_url, token_b) as b:
            await a.call_tool("remember", {"facts": [{"key": "secret", "value": "alpha"}]})
            seen_by_b = error_text(await b.call_tool("get_fact", {"key": "secret"}))
            read_by_b = text(await b.call_tool("recall", {"query": "secret"}))
            frontier_b = (await b.read_resource("pmem://frontier")).contents[0].text
            return seen_by_b, read_by_b, frontier_b

    seen_by_b, read_by_b, frontier_b = anyio.run(session)
    assert "secret" in seen_by_b  # not found
    assert "alpha" not in read_by_b and "alpha" not in frontier_b
    assert not Evidence.objects.filter(namespace=ns_b).exists()


def test_a_missing_or_wrong_token_is_refused_before_any_tool_runs(api_url, mcp_url, agent):
    ns, token = agent()
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "t", "version": "0"}}}
    headers = {"Accept": "application/json, text/event-stream"}
    for auth in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Token {token}"}):
        answer = httpx2.post(mcp_url, json=hello, headers={**headers, **auth})
        assert answer.status_code == 401, (auth, answer.text)

    async def session() -> None:
        async with http_session(mcp_url, "wrong") as mcp:
            await mcp.call_tool("remember", {"facts": [{"key": "x", "value": "1"}]})

    with pytest.raises(Exception):  # noqa: B017 - the SDK's error for a 401 varies by version
        anyio.run(session)
    assert not Evidence.objects.filter(namespace=ns).exists()


def test_an_unreachable_api_answers_503_not_500(tmp_path):
    from tests.support.mcp import free_port, mcp_http_process

    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "t", "version": "0"}}}
    with mcp_http_process(f"http://127.0.0.1:{free_port()}", tmp_path) as url:
        answer = httpx2.post(url, json=hello, timeout=60, headers={
            "Accept": "application/json, text/event-stream", "Authorization": "Bearer any"})
    assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
    assert "unreachable" in answer.json()["error"]


def test_a_session_inherits_its_tokens_sources_and_refused_times_are_short_errors(
        api_url, mcp_url, agent):
    """SPEC §8 through MCP: a session claims its token's one bound source when it names none
    and cannot claim another trusted one; the probe's as_of +16:00 (once a 500 through every
    tool that reads the past) is an error naming as_of."""
    from memory.services import token_create, trust_set

    ns, _ = agent()
    trust_set(namespace=ns, source="hr", level=9, actor="cli")
    token = token_create(namespace=ns, client="hr-bot", scope="write", sources=["hr"]).key
    loose = token_create(namespace=ns, client="gossip", scope="write").key

    async def session() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with http_session(mcp_url, token) as mcp, http_session(mcp_url, loose) as other:
            out["hr"] = structured(await mcp.call_tool("remember", {"facts": [
                {"key": "salary", "value": "120k"}]}))
            out["forged"] = error_text(await other.call_tool("remember", {
                "facts": [{"key": "salary", "value": "555k"}], "source": "hr"}))
            for tool, args in (("get_fact", {"key": "salary"}), ("recall", {"query": "salary"})):
                out[tool] = error_text(await mcp.call_tool(tool, {
                    **args, "as_of": "2026-12-01T10:00:00+16:00"}))
        return out

    out = anyio.run(session)
    assert out["hr"]["status"] == "committed"
    assert list(Evidence.objects.filter(namespace=ns).values_list("source", flat=True)) == ["hr"]
    assert "may not name source 'hr'" in out["forged"] and len(out["forged"]) < 300
    for tool in ("get_fact", "recall"):
        assert out[tool].startswith("as_of:") and "±15:59" in out[tool], out[tool]
    assert Evidence.objects.filter(namespace=ns).count() == 1  # the forged one: not stored
