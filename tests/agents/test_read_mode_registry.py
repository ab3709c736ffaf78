"""Read modes come from one registry (memory.reads.READ_MODES): the API's validation, the
MCP tool's enum and the explorer's comparison all offer exactly its modes, in its order."""

from __future__ import annotations

import anyio
import pytest
from django.utils.html import escape

from memory.api.serializers import AnswerIn, ReadIn
from memory.reads import ANSWER_MODES, READ_MODES
from pmem_mcp.server import build_server


def test_the_api_validates_against_the_registry():
    assert list(ReadIn().fields["mode"].choices) == list(READ_MODES)
    assert list(AnswerIn().fields["mode"].choices) == list(ANSWER_MODES)


def test_the_mcp_recall_tool_offers_the_registrys_modes():
    server = build_server(lambda: None)  # type: ignore[arg-type, return-value]

    async def recall_schema() -> dict:
        tools = {t.name: t for t in await server.list_tools()}
        return tools["recall"].input_schema

    schema = anyio.run(recall_schema)
    assert schema["properties"]["mode"]["enum"] == list(READ_MODES)
    assert schema["properties"]["mode"]["default"] == "frontier"


@pytest.mark.django_db
def test_the_explorer_compares_and_explains_every_mode(client, django_user_model):
    from memory.services import namespace_create

    ns = namespace_create(name="modes")
    client.force_login(django_user_model.objects.create_superuser("m", "m@example.org", "pw"))
    page = client.get(f"/ns/{ns.name}/read/").content.decode()
    positions = [page.index(escape(mode.help)) for mode in READ_MODES.values()]
    assert positions == sorted(positions)
