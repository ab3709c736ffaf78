"""SPEC §5.4 with the bundled real model (SmolLM2-135M on llama.cpp's server, behind the
recording proxy): a client's structured update lands whatever the model would say, text the
rule extractor understands whole costs no call, and ``annotate: true`` asks the model."""

from __future__ import annotations

from typing import Any

import pytest

from memory.models import Operation
from memory.selectors.cells import cell_value
from memory.services import observation_ingest
from pmem_site.local_model import LocalModelServer
from tests.model.conftest import CALL_TIMEOUT_S
from tests.support.recording_proxy import RecordingProxy

pytestmark = [pytest.mark.model, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def with_model(settings: Any, proxy: RecordingProxy, local_model: LocalModelServer) -> None:
    settings.PMEM_LLM_BASE_URL, settings.PMEM_LLM_MODEL = proxy.base_url, local_model.model
    settings.PMEM_LLM_TIMEOUT, settings.PMEM_LLM_MAX_TOKENS = CALL_TIMEOUT_S, 256
    settings.PMEM_EMBED_BASE_URL = ""


def _chat(proxy: RecordingProxy, before: int) -> list[str]:
    return [c.job for c in proxy.calls[before:] if c.job != "embeddings"]


def _ops(evidence: Any) -> list[tuple[str, str | None, str]]:
    return [(o.type, o.value, o.method) for o in
            Operation.objects.filter(evidence=evidence).order_by("id")]


def test_a_clients_structured_update_lands_with_the_real_model(ns, with_model, proxy):
    before = len(proxy.calls)
    observation_ingest(namespace=ns, facts=[{"key": "user_meeting_day", "value": "Tuesday"}])
    update = observation_ingest(namespace=ns,
                                facts=[{"key": "user_meeting_day", "value": "Thursday"}])
    assert _ops(update) == [("accept", "Thursday", "client")]
    assert cell_value(namespace=ns, key="user_meeting_day").value == "Thursday"
    assert _chat(proxy, before) == []


def test_templated_text_commits_by_rule_without_a_call(ns, with_model, proxy):
    before = len(proxy.calls)
    evidence = observation_ingest(namespace=ns, text="user_city = Lisbon")
    assert _ops(evidence) == [("accept", "Lisbon", "rule")]
    assert _chat(proxy, before) == [] and evidence.chat_calls == 0


def test_annotate_true_asks_the_real_model(ns, with_model, proxy):
    observation_ingest(namespace=ns, facts=[{"key": "user_meeting_day", "value": "Tuesday"}])
    before = len(proxy.calls)
    asked = observation_ingest(namespace=ns, facts=[
        {"key": "user_meeting_day", "value": "Thursday", "annotate": True}])
    assert asked.state in ("committed", "failed")
    assert "annotation" in _chat(proxy, before)
    assert asked.state == "failed" or [m for _, _, m in _ops(asked)] == ["model"]
