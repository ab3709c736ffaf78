"""pmem_client and namespaces that end, against the live API: an application token lists its
users' namespaces, exports one and deletes one (sync and async); a fact remembered with a
``ttl`` carries its expiry, is served before it and never after, and its history says
``expired`` while ``as_of`` before it still shows it."""

from __future__ import annotations

import json
from datetime import timedelta

import anyio
import pytest

import pmem_client
from memory.domain.scopes import Scope
from memory.models import Version
from memory.services import token_create
from pmem_client import AsyncClient, Client

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def app_token(scope: Scope = Scope.REVIEW) -> str:
    return token_create(namespace_prefix="tenant-", client="tenant-app", scope=scope).key


def test_an_application_lists_exports_and_deletes_a_users_namespace(api_url):
    token = app_token()
    with Client(api_url, token) as memory:
        memory.remember(facts=[{"key": "food", "value": "sushi"}], namespace="tenant-alice")
        memory.remember(facts=[{"key": "food", "value": "pizza"}], namespace="tenant-bob")
        listed = list(memory.namespaces(page_size=1))
        assert [(n.name, n.cells) for n in listed] == [("tenant-alice", 1), ("tenant-bob", 1)]
        assert all(isinstance(n, pmem_client.NamespaceInfo) and n.last_write_at for n in listed)
        lines = memory.export(namespace="tenant-alice").splitlines()
        assert json.loads(lines[0])["namespace"] == "tenant-alice"
        assert any('"sushi"' in line for line in lines) and not any("pizza" in x for x in lines)
        gone = memory.delete_namespace("tenant-alice", report=True)
        assert isinstance(gone, pmem_client.NamespaceDeleted) and gone.counts["cells"] == 1
        with pytest.raises(pmem_client.NotFound):
            memory.get_fact("food", namespace="tenant-alice")
        assert [n.name for n in memory.namespaces()] == ["tenant-bob"]
        assert memory.get_fact("food", namespace="tenant-bob").value == "pizza"


def test_the_async_client_lists_exports_and_deletes_too(api_url):
    token = app_token()

    async def run() -> None:
        async with AsyncClient(api_url, token, namespace="tenant-carol") as memory:
            await memory.remember(facts=[{"key": "tea", "value": "green"}], ttl=3600)
            assert [n.name async for n in memory.namespaces()] == ["tenant-carol"]
            assert '"green"' in await memory.export()
            assert await memory.delete_namespace() is None
            assert [n.name async for n in memory.namespaces()] == []

    anyio.run(run)


def test_a_fact_with_a_ttl_is_served_before_its_instant_and_never_after(api_url):
    with Client(api_url, app_token(), namespace="tenant-dora") as memory:
        memory.remember(facts=[{"key": "door_code", "value": "4711"}], ttl=3600)
        fact = memory.get_fact("door_code")
        assert fact.value == "4711" and fact.expires_at is not None
        assert [i["key"] for i in memory.recall("door code").items] == ["door_code"]
        # The clock passes the instant (written on the version: no test waits an hour).
        version = Version.objects.get(value="4711")
        instant = version.created_at + timedelta(milliseconds=1)
        Version.objects.filter(pk=version.pk).update(expires_at=instant)
        fact = memory.get_fact("door_code")
        assert (fact.value, fact.status) == (None, "empty")
        assert [(h.value, h.status) for h in fact.history] == [("4711", "expired")]
        assert "door_code" not in [i["key"] for i in memory.recall("door code").items]
        assert memory.get_fact("door_code", as_of=instant - timedelta(microseconds=1)).value \
            == "4711"
        assert [o.op for o in memory.operations(key="door_code")][0] == "expire"
        with pytest.raises(ValueError):
            memory.remember("no facts to expire", ttl=60)
