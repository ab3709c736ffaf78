"""The model path against a real local model over real HTTP (SmolLM2-135M on llama.cpp's
server): structured-output negotiation, extraction, soft identity, annotation. The contract
is asserted, never the model's wisdom: answers come back or fail with a reason, nothing
unvalidated is kept, token counts are the server's."""

from __future__ import annotations

import pytest

from memory.llm.annotation import AnnotationItem, annotate
from memory.llm.client import ModelClient
from memory.llm.errors import UnsupportedForm, is_transport
from memory.llm.extraction import extract_facts, validate_model_facts
from memory.llm.facts import OPS
from memory.llm.identity import confirm_same_key
from tests.support.recording_proxy import RecordingProxy

pytestmark = pytest.mark.model

SENTENCES = [
    "Update: mug 1 has been moved from countertop 1 to cabinet 3.",
    "My personal best 5k time is 27:12.",
    "Alice moved to Lisbon last spring.",
    "The team meeting is on Tuesday.",
    "The move of mug 1 to cabinet 3 was reported in error.",
]


def test_llama_cpp_python_takes_json_object_and_refuses_json_schema_once(
        model_client: ModelClient, proxy: RecordingProxy) -> None:
    found = model_client.probe()
    assert isinstance(found["json_schema"], UnsupportedForm)
    assert found["json_object"] is None
    assert model_client.structured_output == "json_object"
    before = len(proxy.calls)
    result = extract_facts(model_client, SENTENCES[0])
    calls = proxy.calls[before:]
    # Known form: one call, in json_object with the schema, not retried, not re-probed.
    assert [(c.job, c.form, c.status) for c in calls] == [("extraction", "json_object", 200)]
    assert not is_transport(result.failure)


def test_negotiation_costs_one_refused_call_then_the_form_is_remembered(
        model_client: ModelClient, proxy: RecordingProxy) -> None:
    before = len(proxy.calls)
    extract_facts(model_client, SENTENCES[1])
    extract_facts(model_client, SENTENCES[2])
    assert [(c.form, c.status) for c in proxy.calls[before:]] == [
        ("json_schema", 500), ("json_object", 200), ("json_object", 200)]


def test_extraction_keeps_only_valid_facts_and_reports_real_usage(
        model_client: ModelClient, proxy: RecordingProxy) -> None:
    for sentence in SENTENCES:
        before = len(proxy.calls)
        result = extract_facts(model_client, sentence)
        served = [c for c in proxy.calls[before:] if c.status == 200]
        assert not is_transport(result.failure), result.failure
        # Whatever the model said, what is kept passes validation again untouched.
        again, dropped = validate_model_facts(
            [{"key": f.key, "value": f.value, "assertion": f.assertion} for f in result.facts],
            observation=sentence)
        assert again == result.facts and dropped == []
        assert all(f.key and len(f.key) <= 64 for f in result.facts)
        assert all(d["reason"] for d in result.dropped)
        assert result.prompt_tokens == sum(c.prompt_tokens for c in served) > 0
        assert result.completion_tokens == sum(c.completion_tokens for c in served) > 0


def test_soft_identity_answers_same_or_different_or_is_taken_for_different(
        model_client: ModelClient, proxy: RecordingProxy) -> None:
    before = len(proxy.calls)
    verdict = confirm_same_key(model_client, "home_city_of_alice", "alice_home_city")
    [call] = proxy.calls[before:]
    assert call.job == "identity" and call.status == 200
    assert verdict.same in (True, False, None)
    assert (verdict.same is None) == (verdict.failure is not None)
    assert verdict.prompt_tokens == call.prompt_tokens > 0


def test_annotation_answers_one_valid_op_per_fact_in_one_call(
        model_client: ModelClient, proxy: RecordingProxy) -> None:
    items = [AnnotationItem("mug_1_location", "cabinet 3", head_value="countertop 1",
                            head_status="active"),
             AnnotationItem("team_meeting_day", "Thursday", "hedged", head_value="Tuesday",
                            head_status="active"),
             AnnotationItem("personal_best_5k", "27:12")]  # no head: a create, not asked
    before = len(proxy.calls)
    result = annotate(model_client, items)
    calls = [c for c in proxy.calls[before:] if c.status == 200]
    assert [c.job for c in calls] == ["annotation"] and result.calls == 1
    assert len(result.ops) == 3 and all(op.op in OPS for op in result.ops)
    assert (result.ops[2].op, result.ops[2].by_model) == ("accept", False)
    assert all(op.valid or op.reason for op in result.ops)
    assert result.prompt_tokens == calls[0].prompt_tokens > 0
