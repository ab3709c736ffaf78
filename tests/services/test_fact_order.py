"""Each fact of one observation is classified against the state its earlier facts left, as if
they were applied one after another (SPEC §5.4, §5.5): facts [k=C, k=B] over head B end with
B current, C superseded by it — with and without a model, structured and extracted."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from memory.llm.client import endpoint_forms
from memory.models import Operation, Version
from memory.selectors.cells import cell_value
from memory.services import observation_ingest, observations_ingest
from tests.support.scripted_llm import ScriptedLLM, scripted_llm  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def model(settings: Any, scripted_llm: ScriptedLLM) -> Iterator[ScriptedLLM]:  # noqa: F811
    settings.PMEM_LLM_BASE_URL, settings.PMEM_LLM_MODEL = scripted_llm.base_url, "scripted"
    settings.PMEM_LLM_MAX_RETRIES, settings.PMEM_LLM_TIMEOUT = 0, 5.0
    endpoint_forms.clear()
    yield scripted_llm
    endpoint_forms.clear()


def _ops(evidence: Any) -> list[tuple[str, str | None]]:
    return [(o.type, o.value) for o in
            Operation.objects.filter(evidence=evidence).exclude(type="reinstate").order_by("id")]


def _versions(ns: Any) -> list[tuple[str, str, str | None]]:
    return [(v.value, v.status, v.supersedes.value if v.supersedes else None)
            for v in Version.objects.filter(cell__namespace=ns, cell__key="k")
            .select_related("supersedes").order_by("id")]


def _back_and_forth(ns: Any, **second: Any) -> Any:
    observation_ingest(namespace=ns, facts=[{"key": "k", "value": "B"}])
    evidence = observation_ingest(namespace=ns, **second)
    assert evidence.state == "committed"
    assert _ops(evidence) == [("accept", "C"), ("accept", "B")]
    assert cell_value(namespace=ns, key="k").value == "B"
    assert _versions(ns) == [("B", "superseded", None), ("C", "superseded", "B"),
                             ("B", "active", "C")]
    return evidence


def test_a_key_set_and_set_back_in_one_observation_ends_set_back(ns):
    _back_and_forth(ns, facts=[{"key": "k", "value": "C"}, {"key": "k", "value": "B"}])


def test_the_same_in_text_read_by_the_rule_extractor(ns):
    _back_and_forth(ns, text="k = C\nk = B")


def test_the_same_in_a_group_commit(ns):
    observation_ingest(namespace=ns, facts=[{"key": "k", "value": "B"}])
    first, second = observations_ingest(namespace=ns, observations=[
        {"facts": [{"key": "k", "value": "C"}, {"key": "other", "value": "1"},
                   {"key": "k", "value": "B"}]},
        {"facts": [{"key": "k", "value": "B"}]}])
    assert _ops(first) == [("accept", "C"), ("accept", "1"), ("accept", "B")]
    assert _ops(second) == [("noop", "B")]  # support for the B the first one set back
    assert cell_value(namespace=ns, key="k").value == "B"


def test_with_a_model_structured_facts_set_back(ns, model):
    _back_and_forth(ns, facts=[{"key": "k", "value": "C"}, {"key": "k", "value": "B"}])
    assert model.counts["annotation"] == 0


def test_with_a_model_each_extracted_fact_is_annotated_against_the_earlier_ones(ns, model):
    evidence = _back_and_forth(ns, text="Two notes.\nk = C\nk = B")
    asked = [json.loads(r.body["messages"][1]["content"].split("<facts>")[1]
                        .split("</facts>")[0])["facts"]
             for r in model.requests_for("annotation")]
    # one call per round: the second fact of k was shown the head the first one left
    assert [[(f["value"], f["head_value"]) for f in facts] for facts in asked] == [
        [("C", "B")], [("B", "C")]]
    assert evidence.chat_calls == 3  # extraction + one annotation per round


def test_with_a_model_an_annotated_client_fact_after_a_plain_one(ns, model):
    observation_ingest(namespace=ns, facts=[{"key": "k", "value": "B"}])
    evidence = observation_ingest(namespace=ns, facts=[
        {"key": "k", "value": "C"}, {"key": "k", "value": "B", "annotate": True}])
    assert [(o.type, o.value, o.method) for o in Operation.objects.filter(evidence=evidence)
            .order_by("id")] == [("accept", "C", "client"), ("accept", "B", "model")]
    assert cell_value(namespace=ns, key="k").value == "B"
