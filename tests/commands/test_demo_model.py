"""``pmem_demo`` (what ``make run`` loads) never depends on a model: with a model that answers
nonsense or is down it writes the same histories, deterministically, without asking it; an
embeddings endpoint that is down leaves the observations waiting, and the command succeeds."""

from __future__ import annotations

import socket
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from memory.llm.embedding import reset_embedder_cache
from memory.models import Evidence, Namespace
from memory.selectors.cells import cell_detail
from tests.support.scripted_llm import Fault, ScriptedLLM

pytestmark = pytest.mark.django_db

EXPECTED = {"alice_home_city": ("Lisbon", "active"), "mug_1_location": ("countertop 1", "active"),
            "team_meeting_day": ("Tuesday", "contested"), "project_lead": ("Sam", "active"),
            "favorite_color": ("green", "active"), "temp_access_code": (None, "empty"),
            "laptop_1_location": ("desk 1", "active")}


def demo_cells() -> dict[str, tuple[str | None, str]]:
    ns = Namespace.objects.get(name="demo")
    return {key: (d.value, d.status) for key in EXPECTED
            if (d := cell_detail(namespace=ns, key=key)) is not None}


def refused_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


@pytest.fixture(autouse=True)
def _fresh_embedder() -> Any:
    reset_embedder_cache()
    yield
    reset_embedder_cache()


def test_the_demo_with_a_model_answering_nonsense_asks_it_nothing(settings: Any) -> None:
    with ScriptedLLM() as server:
        settings.PMEM_LLM_BASE_URL, settings.PMEM_LLM_MODEL = server.base_url, server.model
        server.push(Fault.CUSTOM('{"facts": [{"key": "", "value": "nonsense"}]}'), times=100)
        call_command("pmem_demo", stdout=StringIO())
        assert sum(n for job, n in server.counts.items() if job != "embeddings") == 0
    assert demo_cells() == EXPECTED
    assert not Evidence.objects.filter(namespace__name="demo").exclude(state="committed").exists()


def test_the_demo_with_a_model_that_is_down_is_complete(settings: Any) -> None:
    settings.PMEM_LLM_BASE_URL, settings.PMEM_LLM_MODEL = refused_url(), "down"
    call_command("pmem_demo", stdout=StringIO())
    assert demo_cells() == EXPECTED


def test_the_demo_with_embeddings_down_waits_and_the_command_succeeds(settings: Any) -> None:
    settings.PMEM_EMBED_BASE_URL, settings.PMEM_EMBED_MODEL = refused_url(), "down"
    settings.PMEM_LLM_MAX_RETRIES, settings.PMEM_LLM_TIMEOUT = 0, 2.0
    err = StringIO()
    call_command("pmem_demo", stdout=StringIO(), stderr=err)
    assert "the embeddings endpoint did not answer" in err.getvalue()
    states = set(Evidence.objects.filter(namespace__name="demo").values_list("state", flat=True))
    assert states == {"pending"}  # stored, in order, for the worker to commit later
