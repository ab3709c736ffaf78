"""The clients' ``answer``: the server's model answers from a read (``POST answer/``), and a
server without a model says so (Conflict)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from memory.services import namespace_create, observation_ingest, token_create
from pmem_client import AsyncClient, Client, Conflict
from tests.support.scripted_llm import scripted_llm  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db(transaction=True)


def test_answer_reads_with_the_servers_model_and_needs_one(live_server, settings,
                                                           scripted_llm):  # noqa: F811
    ns = namespace_create(name="client-answer")
    observation_ingest(namespace=ns, facts=[{"key": "user_city", "value": "Lisbon"}])
    token = token_create(namespace=ns, client="agent").key
    with Client(live_server.url, token) as memory:
        with pytest.raises(Conflict, match="needs a model"):
            memory.answer("where do I live?")
        settings.PMEM_LLM_BASE_URL = scripted_llm.base_url
        settings.PMEM_LLM_MODEL, settings.PMEM_LLM_MAX_RETRIES = "scripted", 0
        said = memory.answer("where do I live?", k=3)
    assert said.answer == "Lisbon" and said.mode == "frontier"
    assert "user_city = Lisbon" in said.context and said.cost["chat_calls"] == 1


def test_the_async_client_answers_too(live_server, settings, scripted_llm):  # noqa: F811
    ns = namespace_create(name="client-answer-async")
    observation_ingest(namespace=ns, facts=[{"key": "user_pet", "value": "a cat"}])
    token = token_create(namespace=ns, client="agent").key
    settings.PMEM_LLM_BASE_URL = scripted_llm.base_url
    settings.PMEM_LLM_MODEL, settings.PMEM_LLM_MAX_RETRIES = "scripted", 0

    async def session() -> Any:
        async with AsyncClient(live_server.url, token) as memory:
            return await memory.answer("which pet do I have?", mode="frontier_cosine")

    said = anyio.run(session)
    assert said.answer == "a cat" and said.mode == "frontier_cosine"
