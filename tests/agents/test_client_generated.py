"""The blocking client is made from the async one (tools/unasync_client.py), so the two cannot
drift: the committed ``pmem_client/_sync_core.py`` is what the async core gives now, and the
twins answer to the same capabilities."""

from __future__ import annotations

import inspect

from pmem_client import AsyncClient, Client


def test_the_blocking_core_is_generated_from_the_async_core():
    from tools.unasync_client import TARGET, generated

    assert TARGET.read_text() == generated(), (
        "pmem_client/_sync_core.py is stale: run .venv/bin/python tools/unasync_client.py")


def test_both_clients_offer_the_same_capabilities_with_the_same_parameters():
    def public(cls: type) -> dict[str, inspect.Signature]:
        return {name: inspect.signature(member) for name, member in inspect.getmembers(cls)
                if not name.startswith("_") and callable(member)}

    blocking, asynchronous = public(Client), public(AsyncClient)
    assert set(blocking) - {"close"} == set(asynchronous) - {"aclose"}
    for name, signature in blocking.items():
        if name != "close":
            assert list(signature.parameters) == list(asynchronous[name].parameters), name
