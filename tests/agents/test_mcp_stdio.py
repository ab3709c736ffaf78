"""``manage.py pmem_mcp`` over stdio, driven by the official SDK's ``stdio_client``: the same
tools, through the same API (in-process), on the namespace it was started for."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import anyio
import pytest

from memory.models import ApiToken, Evidence
from pmem_client import Client
from tests.agents.conftest import stdio_env
from tests.agents.test_mcp_http import TOOLS
from tests.support.mcp import ROOT, error_text, stdio_session, structured, text

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def _session_tokens(ns: Any) -> int:
    from django.db import connection

    try:  # runs in a helper thread: its connection must not outlive it
        return ApiToken.objects.filter(namespace=ns, client="desk", revoked_at__isnull=True).count()
    finally:
        connection.close()


def test_stdio_serves_every_tool_on_the_named_namespace(api_url, worker, agent):
    ns, token = agent()

    async def session() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with stdio_session("--namespace", ns.name, "--client", "desk",
                                 env=stdio_env(worker)) as mcp:
            call = mcp.call_tool
            out["tools"] = {t.name for t in (await mcp.list_tools()).tools}
            out["tokens"] = await anyio.to_thread.run_sync(_session_tokens, ns)
            out["remember"] = structured(await call("remember", {"facts": [
                {"key": "mug_1_location", "value": "table 1"}]}))
            await call("remember", {"facts": [{"key": "mug_1_location", "value": "shelf 2"}]})
            out["recall"] = text(await call("recall", {"query": "where is mug 1?"}))
            out["get_fact"] = structured(await call("get_fact", {"key": "mug_1_location"}))
            out["history"] = structured(await call("fact_history", {"key": "mug_1_location",
                                                                    "limit": 1}))
            out["retract"] = structured(await call("retract", {"key": "mug_1_location",
                                                               "reason": "misread"}))
            out["refused"] = error_text(await call("retract", {"key": "nothing",
                                                               "reason": "x"}))
            await call("remember", {"facts": [{"key": "alice_employer", "value": "Acme"}]})
            out["contest"] = structured(await call("contest", {"key": "alice_employer",
                                                               "value": "Globex"}))
            out["resolve"] = structured(await call("resolve", {
                "key": "alice_employer", "value": "Acme", "reason": "payroll says so"}))
            out["status"] = structured(await call("observation_status",
                                                  {"id": out["remember"]["id"]}))
            out["cell"] = (await mcp.read_resource("pmem://cells/mug_1_location")
                           ).contents[0].text
        return out

    out = anyio.run(session)
    assert out["tools"] == TOOLS and out["tokens"] == 1
    assert out["remember"]["status"] == "committed"
    assert "mug_1_location = shelf 2" in out["recall"]
    assert out["get_fact"]["value"] == "shelf 2"
    assert len(out["history"]["results"]) >= 1
    assert (out["retract"]["operation"]["actor"], out["retract"]["cell"]["value"]) == (
        "mcp:desk", "table 1")
    assert out["refused"] == "no cell with key 'nothing': nothing to retract (nothing was written)"
    assert out["contest"]["cell"]["status"] == "contested"
    assert out["resolve"]["cell"]["value"] == "Acme"
    assert out["status"]["status"] == "committed"
    assert '"table 1"' in out["cell"]
    with Client(api_url, token) as api:  # seen through the HTTP API afterwards
        assert api.get_fact("mug_1_location").value == "table 1"
        assert ("resolve", "mcp:desk", "payroll says so") in {
            (o.op, o.actor, o.reason) for o in api.operations()}
    # The session's token (scope write: what the tools need) ended with the session.
    made = ApiToken.objects.get(namespace=ns, client="desk")
    assert made.scope == "write" and made.revoked_at is not None


def test_stdio_with_a_token_acts_as_it_and_sees_its_namespace_only(api_url, worker, agent):
    ns_a, token_a = agent("a", client="alpha")
    ns_b, token_b = agent("b")
    with Client(api_url, token_b) as b:
        b.remember(facts=[{"key": "secret", "value": "bravo"}])

    async def session() -> tuple[dict[str, Any], str]:
        async with stdio_session("--token", token_a, env=stdio_env(worker)) as mcp:
            wrote = structured(await mcp.call_tool("remember", {"facts": [
                {"key": "mine", "value": "alpha"}]}))
            unseen = error_text(await mcp.call_tool("get_fact", {"key": "secret"}))
            return wrote, unseen

    wrote, unseen = anyio.run(session)
    assert "secret" in unseen
    assert Evidence.objects.get(pk=wrote["id"]).namespace_id == ns_a.pk
    assert Evidence.objects.get(pk=wrote["id"]).actor == "mcp:alpha"


def test_stdio_refuses_a_bad_token_before_serving(worker):
    hello = ('{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion":'
             ' "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}\n')
    done = subprocess.run([sys.executable, "manage.py", "pmem_mcp", "--token", "not-a-token"],
                          cwd=ROOT, env=stdio_env(worker), input=hello, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode != 0
    assert "the token was refused: invalid token" in done.stderr
    assert done.stdout == ""  # not one protocol message: no tool could have run
