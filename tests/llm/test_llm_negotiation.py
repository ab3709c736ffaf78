"""Structured-output negotiation per endpoint (docs/decisions.md, "Structured-output
negotiation"): each server takes a schema in its own request form; the client finds it with
its first call, remembers it, never retries a refused form as transient, and negotiates again
after a failure. The scripted server refuses forms as the real servers do."""

from __future__ import annotations

import json
import logging

import pytest

from memory.llm import prompts
from memory.llm.client import FORMS, ModelClient, endpoint_forms
from memory.llm.errors import TransportError, UnsupportedForm, is_transport
from memory.llm.extraction import extract_facts
from tests.support.scripted_llm import Fault, ScriptedLLM


def _client(server: ScriptedLLM, **options: object) -> ModelClient:
    return ModelClient(base_url=server.base_url, model=server.model, timeout=5.0,
                       max_retries=2, backoff_base=0.01, backoff_cap=0.05, **options)


def _extract(client: ModelClient):
    return client.chat_json(messages=prompts.extraction_messages("colour = blue"),
                            schema=prompts.EXTRACTION_SCHEMA, schema_name=prompts.EXTRACTION)


@pytest.fixture
def llama_cpp_python() -> ScriptedLLM:
    """A server that, like llama-cpp-python's, takes ``json_object`` with a schema only."""
    with ScriptedLLM(formats={"json_object"}) as server:
        yield server


def test_a_server_taking_json_schema_costs_no_extra_call(scripted_llm: ScriptedLLM) -> None:
    result = _extract(_client(scripted_llm))
    assert result.ok and (result.form, result.probes) == ("json_schema", 0)
    assert scripted_llm.forms == ["json_schema"]


def test_a_refused_form_is_not_retried_and_the_next_form_is_tried_at_once(
        llama_cpp_python: ScriptedLLM) -> None:
    client = _client(llama_cpp_python)

    result = _extract(client)

    assert result.ok and result.data["facts"][0]["value"] == "blue"
    assert (result.form, result.probes, result.attempts) == ("json_object", 1, 1)
    # One json_schema request although the client retries 500s twice: the 500 names the form.
    assert llama_cpp_python.forms == ["json_schema", "json_object"]
    sent = llama_cpp_python.requests[-1].body["response_format"]
    assert sent == {"type": "json_object", "schema": prompts.EXTRACTION_SCHEMA}


def test_the_form_found_is_remembered_per_endpoint_for_every_client_of_the_process(
        llama_cpp_python: ScriptedLLM) -> None:
    _extract(_client(llama_cpp_python))
    second = _extract(_client(llama_cpp_python))  # another client, same endpoint
    assert (second.form, second.probes) == ("json_object", 0)
    assert llama_cpp_python.forms == ["json_schema", "json_object", "json_object"]
    assert _client(llama_cpp_python).structured_output == "json_object"


@pytest.mark.parametrize("form", ["structured_outputs", "guided_json"])
def test_vllm_body_fields_are_used_when_the_response_formats_are_refused(form: str) -> None:
    with ScriptedLLM(formats={form}) as server:
        result = _extract(_client(server))
        assert result.ok and result.form == form
        body = server.requests[-1].body
        schema = body["structured_outputs"]["json"] if form == "structured_outputs" \
            else body["guided_json"]
        assert schema == prompts.EXTRACTION_SCHEMA and "response_format" not in body


def test_a_server_refusing_every_form_gets_the_schema_in_the_prompt() -> None:
    with ScriptedLLM(formats=set()) as server:
        result = _extract(_client(server))
        assert result.ok and (result.form, result.probes) == ("prompt", 4)
        assert server.forms == list(FORMS)
        system = server.requests[-1].body["messages"][0]["content"]
        assert json.dumps(prompts.EXTRACTION_SCHEMA) in system


def test_a_refused_remembered_form_negotiates_again_from_the_top(
        llama_cpp_python: ScriptedLLM) -> None:
    client = _client(llama_cpp_python)
    _extract(client)
    llama_cpp_python.formats = {"json_schema"}  # the server was replaced by another

    result = _extract(client)

    assert result.ok and result.form == "json_schema"
    assert llama_cpp_python.forms[2:] == ["json_object", "json_schema"]
    assert client.structured_output == "json_schema"


def test_a_failed_call_forgets_the_form_so_the_next_one_negotiates_again(
        llama_cpp_python: ScriptedLLM) -> None:
    client = _client(llama_cpp_python)
    _extract(client)
    llama_cpp_python.push(Fault.HTTP_500, times=3)

    failed = _extract(client)

    assert is_transport(failed.failure) and failed.failure.status == 500
    assert client.structured_output is None
    assert _extract(client).form == "json_object"
    assert llama_cpp_python.forms[-2:] == ["json_schema", "json_object"]


def test_an_unsupported_form_answer_is_no_transport_error() -> None:
    refused = UnsupportedForm(TransportError("http 500: Input should be 'text'", status=500))
    assert not is_transport(refused)
    assert str(refused) == "unsupported format: http 500: Input should be 'text'"


def test_the_form_chosen_is_logged(llama_cpp_python: ScriptedLLM,
                                   caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="pmem.llm"):
        _extract(_client(llama_cpp_python))
    assert any("structured output for" in r.message and "json_object" in r.message
               for r in caplog.records)


def test_probe_reports_each_form_and_remembers_the_first_taken(
        llama_cpp_python: ScriptedLLM) -> None:
    client = _client(llama_cpp_python)

    found = client.probe()

    assert list(found) == list(FORMS)
    assert found["json_object"] is None and found["prompt"] is None
    assert isinstance(found["json_schema"], UnsupportedForm)
    assert str(found["json_schema"]).startswith("unsupported format: http 500")
    assert str(found["guided_json"]).startswith("unsupported format: http 400")
    assert client.structured_output == "json_object"
    assert all(r.body.get("max_tokens") == 8 for r in llama_cpp_python.requests)


def test_probe_of_an_unreachable_server_names_the_cause_for_every_form() -> None:
    client = ModelClient(base_url="http://127.0.0.1:9/v1", model="m", max_retries=0)
    found = client.probe()
    assert all(isinstance(error, TransportError) and error.reason == "connection"
               and str(error).startswith("connection error") for error in found.values())
    assert client.structured_output is None


def test_extraction_through_a_llama_cpp_style_server_lands_its_facts(
        llama_cpp_python: ScriptedLLM) -> None:
    result = extract_facts(_client(llama_cpp_python), "colour = blue")
    assert result.failure is None and [(f.key, f.value) for f in result.facts] == [
        ("colour", "blue")]


def test_endpoint_forms_are_keyed_by_endpoint_and_model() -> None:
    endpoint_forms.remember("http://a/v1/", "m", "json_object")
    assert endpoint_forms.get("http://a/v1", "m") == "json_object"
    assert endpoint_forms.get("http://a/v1", "other") is None


def test_a_pinned_form_is_the_only_one_asked_and_a_refusal_is_an_error(
        llama_cpp_python: ScriptedLLM) -> None:
    result = _extract(_client(llama_cpp_python, structured_output="json_schema"))
    assert isinstance(result.failure, UnsupportedForm) and not is_transport(result.failure)
    assert result.failure.cause.status == 500
    assert llama_cpp_python.forms == ["json_schema"]
    pinned = _extract(_client(llama_cpp_python, structured_output="json_object"))
    assert pinned.ok and pinned.form == "json_object"
