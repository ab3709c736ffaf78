"""The model as the stack shows it: /healthz's ``model`` field and the explorer's index page
(name and structured-output form), and the facts a model's answer had dropped, visible on the
observation in the API and in the explorer's log."""

from __future__ import annotations

import itertools
import json
import socket
from typing import Any

import pytest
from django.test import Client

from memory.llm.check import forget_status
from memory.llm.client import endpoint_forms
from memory.llm.embedding import reset_embedder_cache
from memory.services import membership_set
from tests.support.scripted_llm import Fault, ScriptedLLM

pytestmark = pytest.mark.django_db


@pytest.fixture
def make_user(db: None) -> Any:
    from django.contrib.auth import get_user_model

    def make() -> Any:
        return get_user_model().objects.create_user(username=f"u{next(_users)}", password="pw")

    return make


_users = itertools.count(1)


@pytest.fixture(autouse=True)
def _fresh() -> None:
    endpoint_forms.clear()
    forget_status()
    reset_embedder_cache()


def use_model(settings: Any, url: str, model: str = "scripted") -> None:
    settings.PMEM_LLM_BASE_URL, settings.PMEM_LLM_MODEL = url, model


def test_healthz_names_the_model_and_the_form_it_takes(client: Client, settings: Any) -> None:
    with ScriptedLLM(formats={"json_object"}) as server:
        use_model(settings, server.base_url)
        body = client.get("/healthz").json()
        assert body["status"] == "ok"
        assert body["model"] == {"name": "scripted", "structured_output": "json_object"}
        client.get("/healthz")
        # Probed once: the second health check reads what the process found.
        assert server.forms == ["json_schema", "json_object"]


def test_healthz_with_a_model_that_is_down_stays_ok_and_says_why(client: Client,
                                                                 settings: Any) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        use_model(settings, f"http://127.0.0.1:{sock.getsockname()[1]}/v1", "down")
    response = client.get("/healthz")
    body = response.json()
    assert response.status_code == 200 and body["status"] == "ok"
    assert body["model"]["name"] == "down" and body["model"]["structured_output"] is None
    assert body["model"]["error"].startswith("refused connection")


def test_the_explorer_index_shows_the_model_and_its_form(settings: Any, make_user: Any) -> None:
    with ScriptedLLM(formats={"structured_outputs"}) as server:
        use_model(settings, server.base_url)
        client = Client()
        client.force_login(make_user())
        page = client.get("/").content.decode()
    assert "Model: <strong>scripted</strong>" in page and "<code>structured_outputs</code>" in page


def test_the_explorer_index_says_when_there_is_no_model(make_user: Any) -> None:
    client = Client()
    client.force_login(make_user())
    assert "Model: none" in client.get("/").content.decode()


GARBAGE = {"facts": [
    {"key": "", "value": "You turn one observation into keyed facts.", "assertion": "asserted"},
    {"key": "mug_1_location", "value": "cabinet 3", "assertion": "asserted"},
    {"key": "mug_1_location", "value": "cabinet 3", "assertion": "asserted"},
    {"key": "key", "value": "value", "assertion": "asserted"},
]}


def test_dropped_facts_are_recorded_on_the_observation_and_shown_in_the_api_and_the_log(
        settings: Any, ns: Any, api: Any, commit_pending: Any, make_user: Any) -> None:
    with ScriptedLLM() as server:
        use_model(settings, server.base_url)
        server.push(Fault.CUSTOM(json.dumps(GARBAGE)), job="extraction")
        created = api.post(f"/api/v1/namespaces/{ns.name}/observations/",
                           {"text": "They told me this. Update: mug 1 has been moved from "
                                    "countertop 1 to cabinet 3."}, format="json").json()
        commit_pending()
        body = api.get(f"/api/v1/namespaces/{ns.name}/observations/{created['id']}/").json()
    assert body["status"] == "committed"
    assert [(o["key"], o["value"]) for o in body["operations"]] == [("mug_1_location",
                                                                    "cabinet 3")]
    extraction = body["extraction"]
    assert extraction["extractor"] == "model" and json.loads(extraction["raw"]) == GARBAGE
    assert [d["reason"] for d in extraction["dropped"]] == [
        "empty key", "duplicate: the same key and value earlier in this answer",
        "key copies the instructions"]
    reviewer = make_user()
    membership_set(namespace=ns, user=reviewer, role="viewer")
    client = Client()
    client.force_login(reviewer)
    page = client.get(f"/ns/{ns.name}/operations/").content.decode()
    assert "Facts dropped from model answers" in page
    assert page.count('class="dropped-fact"') == 3 and "key copies the instructions" in page


def test_client_facts_are_never_deduplicated(settings: Any, ns: Any, api: Any,
                                             commit_pending: Any) -> None:
    facts = [{"key": "position", "value": "a"}, {"key": "position", "value": "b"},
             {"key": "position", "value": "a"}, {"key": "position", "value": "a"}]
    with ScriptedLLM() as server:
        use_model(settings, server.base_url)
        created = api.post(f"/api/v1/namespaces/{ns.name}/observations/", {"facts": facts},
                           format="json").json()
        commit_pending()
        body = api.get(f"/api/v1/namespaces/{ns.name}/observations/{created['id']}/").json()
    assert len(body["operations"]) == 4 and body["extraction"]["dropped"] == []
