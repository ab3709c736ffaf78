"""SPEC §5.4: a client's structured facts, and text the rule extractor understands whole, are
decided without the model; ``annotate: true`` asks for it. The model is the scripted
OpenAI-compatible server over real HTTP, here scripted to answer noop to every annotation."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from memory.llm.client import endpoint_forms
from memory.models import Operation, Version
from memory.selectors.cells import cell_value
from memory.services import observation_ingest
from tests.support.scripted_llm import Fault, ScriptedLLM, scripted_llm  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db(transaction=True)

CHAT_JOBS = ("extraction", "annotation", "identity")


@pytest.fixture
def model(settings: Any, scripted_llm: ScriptedLLM) -> Iterator[ScriptedLLM]:  # noqa: F811
    """The scripted model configured in-process, answering every annotation with noop."""
    settings.PMEM_LLM_BASE_URL, settings.PMEM_LLM_MODEL = scripted_llm.base_url, "scripted"
    settings.PMEM_LLM_MAX_RETRIES, settings.PMEM_LLM_TIMEOUT = 0, 5.0
    endpoint_forms.clear()
    scripted_llm.push(Fault.CUSTOM(json.dumps({"operations": [
        {"key": "user_meeting_day", "op": "noop"}, {"key": "user_city", "op": "noop"}]})),
        job="annotation", times=20)
    yield scripted_llm
    endpoint_forms.clear()


def _chat_calls(server: ScriptedLLM) -> dict[str, int]:
    return {job: server.counts[job] for job in CHAT_JOBS}


def _ops(evidence: Any) -> list[tuple[str, str | None, str]]:
    return [(o.type, o.value, o.method) for o in
            Operation.objects.filter(evidence=evidence).exclude(type="reinstate").order_by("id")]


def test_a_clients_structured_update_lands_though_the_model_would_answer_noop(ns, model):
    observation_ingest(namespace=ns, facts=[{"key": "user_meeting_day", "value": "Tuesday"}])
    update = observation_ingest(namespace=ns,
                                facts=[{"key": "user_meeting_day", "value": "Thursday"}])
    assert update.state == "committed"
    assert _ops(update) == [("accept", "Thursday", "client")]
    assert cell_value(namespace=ns, key="user_meeting_day").value == "Thursday"
    statuses = dict(Version.objects.filter(cell__namespace=ns).values_list("value", "status"))
    assert statuses == {"Tuesday": "superseded", "Thursday": "active"}
    assert _chat_calls(model) == {"extraction": 0, "annotation": 0, "identity": 0}
    assert update.chat_calls == 0


def test_a_clients_repeated_value_supports_the_head(ns, model):
    observation_ingest(namespace=ns, facts=[{"key": "user_meeting_day", "value": "Tuesday"}])
    again = observation_ingest(namespace=ns,
                               facts=[{"key": "user_meeting_day", "value": "tuesday "}])
    assert _ops(again) == [("noop", "tuesday ", "client")]
    head = Version.objects.get(cell__namespace=ns, status="active")
    assert (head.value, head.support) == ("Tuesday", 2)
    assert _chat_calls(model)["annotation"] == 0


def test_annotate_true_asks_the_model(ns, model):
    observation_ingest(namespace=ns, facts=[{"key": "user_meeting_day", "value": "Tuesday"}])
    asked = observation_ingest(namespace=ns, facts=[
        {"key": "user_meeting_day", "value": "Thursday", "annotate": True}])
    assert _ops(asked) == [("noop", "Thursday", "model")]
    assert cell_value(namespace=ns, key="user_meeting_day").value == "Tuesday"
    assert _chat_calls(model)["annotation"] == 1 and asked.chat_calls == 1


def test_hard_commit_still_keeps_an_annotated_correction(ns, model):
    observation_ingest(namespace=ns, facts=[{"key": "user_meeting_day", "value": "Tuesday"}])
    forced = observation_ingest(namespace=ns, facts=[
        {"key": "user_meeting_day", "value": "Thursday", "annotate": True, "hard_commit": True}])
    assert _ops(forced) == [("accept", "Thursday", "model")]
    assert cell_value(namespace=ns, key="user_meeting_day").value == "Thursday"


def test_text_the_rules_understand_whole_never_reaches_the_model(ns, model):
    first = observation_ingest(namespace=ns, text="user_city = Lisbon")
    second = observation_ingest(namespace=ns, text="user_city: Porto\n\n- user_pet = cat")
    assert _ops(first) == [("accept", "Lisbon", "rule")]
    assert _ops(second) == [("accept", "Porto", "rule"), ("accept", "cat", "rule")]
    assert cell_value(namespace=ns, key="user_city").value == "Porto"
    assert _chat_calls(model) == {"extraction": 0, "annotation": 0, "identity": 0}
    assert first.extracted["extractor"] == "rules" and second.chat_calls == 0


def test_text_the_rules_understand_only_in_part_goes_to_the_model(ns, model):
    observation_ingest(namespace=ns, text="user_city = Lisbon")
    moved = observation_ingest(namespace=ns, text="We spoke on the phone.\nuser_city = Porto")
    assert moved.extracted["extractor"] == "model"
    assert _chat_calls(model)["extraction"] == 1 and _chat_calls(model)["annotation"] == 1
    assert _ops(moved) == [("noop", "Porto", "model")]
