"""Model-backed reads through the API, against the scripted OpenAI-compatible server over HTTP:
the answer step, iterative readout and the pruned turn read."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from memory.services import observation_ingest
from tests.support.scripted_llm import scripted_llm  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db


@pytest.fixture
def model(settings, scripted_llm):  # noqa: F811
    settings.PMEM_LLM_BASE_URL = scripted_llm.base_url
    settings.PMEM_LLM_MODEL = "scripted"
    settings.PMEM_LLM_MAX_RETRIES = 0
    settings.PMEM_LLM_TIMEOUT = 5.0
    return scripted_llm


def post(api, ns, path, body):
    return api.post(f"/api/v1/namespaces/{ns.name}/{path}", json.dumps(body),
                    content_type="application/json")


def at(day: int) -> datetime:
    return datetime(2026, 11, day, 12, tzinfo=UTC)


def test_answer_needs_a_model_and_says_so(api, ns):
    r = post(api, ns, "answer/", {"query": "where is the mug?"})
    assert r.status_code == 409 and "needs a model" in r.json()["error"]


def test_answer_from_the_frontier_uses_the_current_value(api, ns, model):
    for text in ("Earlier observation: mug 1 was in countertop 1.",
                 "Update: mug 1 has been moved from countertop 1 to cabinet 3."):
        observation_ingest(namespace=ns, text=text)
    r = post(api, ns, "answer/", {"query": "where is mug 1 now?", "k": 1})
    body = r.json()
    assert r.status_code == 200, body
    assert body["context"].splitlines()[1] == "mug_1_location = cabinet 3"
    assert body["answer"] == "cabinet 3" and body["cost"]["chat_calls"] == 1
    asked = model.requests_for("answer")[-1].body["messages"]
    assert "mug_1_location = cabinet 3" in asked[-1]["content"]  # the model saw the frontier context


def test_iterative_readout_looks_up_more_cells_then_answers(api, ns, model):
    observation_ingest(namespace=ns, text="author_of_our_mutual_friend = Charles Dickens")
    observation_ingest(namespace=ns, text="spouse_of_charles_dickens = Catherine Hogarth")
    observation_ingest(namespace=ns, text="citizenship_of_catherine_hogarth = Scotland")
    model.reply("readout",
                {"action": "lookup", "entity": "Charles Dickens", "relation": "spouse"},
                {"action": "lookup", "entity": "Catherine Hogarth", "relation": "citizenship"},
                {"action": "answer", "answer": "Scotland"})
    r = post(api, ns, "answer/", {"query": "author of Our Mutual Friend", "mode": "iterative",
                                  "k": 1})
    body = r.json()
    assert body["answer"] == "Scotland"
    assert [lk["entity"] for lk in body["lookups"]] == ["Charles Dickens", "Catherine Hogarth"]
    lines = body["context"].splitlines()[1:]
    assert len(lines) == len(set(lines)) == 3  # deduplicated: each cell once
    assert body["cost"]["chat_calls"] == 3


def test_iterative_readout_forces_an_answer_after_three_lookups(api, ns, model):
    observation_ingest(namespace=ns, text="a_key = a value")
    model.reply("readout", *[{"action": "lookup", "entity": "x", "relation": "y"}] * 5)
    model.reply("answer", "forced")
    body = post(api, ns, "answer/", {"query": "a key", "mode": "iterative"}).json()
    assert len(body["lookups"]) == 3 and body["answer"] == "forced"
    assert body["cost"]["chat_calls"] == 4


def test_pruned_read_drops_the_earlier_of_two_conflicting_observations(api, ns, model):
    observation_ingest(namespace=ns, text="alice_home_city = Paris", observed_at=at(1))
    observation_ingest(namespace=ns, text="alice_home_city = Lisbon", observed_at=at(20))
    body = post(api, ns, "read/", {"query": "alice home city", "mode": "pruned"}).json()
    assert "Lisbon" in body["context"] and "Paris" not in body["context"]
    assert body["note"] == "pruned 1 superseded observation(s)"
    prompt = model.requests_for("prune")[0].body["messages"][0]["content"]
    assert "Paris" in prompt and "Lisbon" in prompt  # the model judged values, not dates


def test_pruned_read_keeps_both_when_the_model_says_no(api, ns, model):
    observation_ingest(namespace=ns, text="alice_home_city = Paris", observed_at=at(1))
    observation_ingest(namespace=ns, text="alice_home_city = Lisbon", observed_at=at(20))
    model.reply("prune", "no")
    body = post(api, ns, "read/", {"query": "alice home city", "mode": "pruned"}).json()
    assert "Lisbon" in body["context"] and "Paris" in body["context"]


def test_pruned_read_never_asks_about_same_day_observations(api, ns, model):
    observation_ingest(namespace=ns, text="alice_home_city = Paris", observed_at=at(3))
    observation_ingest(namespace=ns, text="alice_home_city = Lisbon", observed_at=at(3))
    post(api, ns, "read/", {"query": "alice home city", "mode": "pruned"})
    assert model.requests_for("prune") == []
