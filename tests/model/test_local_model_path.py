"""Whole observations through the API and a real Celery worker against the real local model,
then the model-backed reads (the answer step, iterative readout, the pruned read). Each call
the model server answers is seen by a recording proxy, so the per-observation bound and the
token counts are checked against the server's own figures. The contract, never the wisdom."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest
from rest_framework.test import APIClient

from memory.domain import normalize_key
from memory.llm.extraction import rule_extractor, validate_model_facts
from memory.models import Cell, Evidence
from memory.services import token_create
from pmem_site.local_model import LocalModelServer
from tests.support.recording_proxy import RecordingProxy
from tests.support.worker import wait_settled
from tests.tasks.helpers import assert_memory_consistent, ops_of

pytestmark = [pytest.mark.model, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

#: Seconds an observation may take to settle (committed or failed with a reason): two calls
#: of at most PMEM_LLM_MAX_TOKENS tokens each on a shared CPU, and their retries.
SETTLE_BOUND_S = 300

OBSERVATIONS: list[dict[str, Any]] = [
    {"text": "Update: mug 1 has been moved from countertop 1 to cabinet 3.",
     "observed_at": "2026-01-05T09:00:00Z"},
    {"text": "The project lead is Dana.", "facts": [{"key": "project_lead", "value": "Dana"}]},
    {"text": "My personal best 5k time is 27:12."},
    {"facts": [{"key": "project_lead", "value": "Sam", "op": "accept"}]},
    {"text": "Update: mug 1 has been moved from cabinet 3 to drawer 2.",
     "observed_at": "2026-02-07T09:00:00Z"},
    {"text": "The move of mug 1 to drawer 2 was reported in error."},
]


def _env(proxy: RecordingProxy, local_model: LocalModelServer) -> dict[str, str]:
    return {"PMEM_LLM_BASE_URL": proxy.base_url, "PMEM_LLM_MODEL": local_model.model,
            "PMEM_EMBED_BASE_URL": "", "PMEM_LLM_TIMEOUT": "120", "PMEM_LLM_MAX_RETRIES": "1",
            "PMEM_LLM_MAX_TOKENS": "256", "PMEM_TASK_MAX_RETRIES": "1"}


def _observe(api: APIClient, ns: Any, body: dict[str, Any], proxy: RecordingProxy,
             worker: Any) -> tuple[Evidence, list[Any]]:
    started = time.monotonic()
    created = api.post(f"/api/v1/namespaces/{ns.name}/observations/", body, format="json")
    assert created.status_code == 202, created.content
    wait_settled([created.json()["id"]], timeout=SETTLE_BOUND_S, worker=worker)
    served = [c for c in proxy.between(started, time.monotonic())
              if c.status == 200 and c.job != "embeddings"]
    return Evidence.objects.get(pk=created.json()["id"]), served


def test_whole_observations_through_the_api_and_a_worker_keep_the_contract(
        celery_worker_proc: Any, proxy: RecordingProxy, local_model: LocalModelServer,
        ns: Any, settings: Any) -> None:
    worker = celery_worker_proc(llm=None, **_env(proxy, local_model))
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token_create(namespace=ns, client='t').key}")
    seen: list[str] = []
    for body in OBSERVATIONS:
        before = set(Cell.objects.filter(namespace=ns).values_list("key", flat=True))
        evidence, served = _observe(api, ns, body, proxy, worker)
        seen.append(body.get("text", ""))
        assert evidence.state in ("committed", "failed"), evidence.state
        assert evidence.state == "committed" or evidence.error, "a failure names its reason"
        jobs = Counter(c.job for c in served)
        new_keys = {normalize_key(f["key"]) for f in (evidence.extracted or {}).get("facts", [])
                    } - before
        # At most extraction + one batched annotation, plus one identity call per new key.
        assert jobs["extraction"] <= 1 and jobs["annotation"] <= 1, jobs
        assert jobs["identity"] <= len(new_keys), jobs
        if evidence.state == "committed":
            assert evidence.chat_calls == len(served), (evidence.chat_calls, jobs)
            # Token counts are the server's own usage figures.
            assert evidence.prompt_tokens == sum(c.prompt_tokens for c in served)
            assert evidence.completion_tokens == sum(c.completion_tokens for c in served)
        # Text the rule extractor understands whole (templated lines) never reaches the
        # model; the rest is extracted by it, in one call (SPEC §5.4).
        understood = bool(body.get("text")) and rule_extractor().extract_whole(body["text"])
        if body.get("text") and body.get("facts"):
            # Text sent with facts is their evidence: not extracted again (SPEC §5.2).
            assert jobs["extraction"] == 0, jobs
        elif body.get("text") and evidence.state == "committed":
            assert jobs["extraction"] == (0 if understood else 1), jobs
            assert understood or evidence.prompt_tokens > 0
        if understood and not body.get("facts"):
            assert not served, jobs
        answer = api.get(f"/api/v1/namespaces/{ns.name}/observations/{evidence.pk}/").json()
        assert answer["status"] == evidence.state
        if body.get("text") and not body.get("facts") and answer["extraction"]:
            assert answer["extraction"]["extractor"].endswith("rules" if understood else "model")
            assert all(d["reason"] for d in answer["extraction"]["dropped"])
    # Structured facts always land: a create on a new key, an explicit accept.
    second, fourth = Evidence.objects.filter(namespace=ns).order_by("seq")[1:4:2]
    assert second.state == fourth.state == "committed"
    assert ("project_lead", "accept", "Dana") in [(o.key, o.type, o.value)
                                                  for o in ops_of(second)]
    assert [(o.key, o.type, o.value) for o in ops_of(fourth)] == [("project_lead", "accept",
                                                                   "Sam")]
    # No empty key, no key or value copied from the instructions was written.
    cells = list(Cell.objects.filter(namespace=ns).select_related("head"))
    _, dropped = validate_model_facts(
        [{"key": c.key, "value": c.head.value if c.head else "x"} for c in cells],
        observation="\n".join(seen))
    assert all(c.key for c in cells) and dropped == [], dropped
    assert_memory_consistent(ns)
    _reads(api, ns, proxy, local_model, settings)


def _reads(api: APIClient, ns: Any, proxy: RecordingProxy, local_model: LocalModelServer,
           settings: Any) -> None:
    """POST answer/ (one read, then iterative readout) and the pruned read, in-process."""
    settings.PMEM_LLM_BASE_URL, settings.PMEM_LLM_MODEL = proxy.base_url, local_model.model
    settings.PMEM_LLM_TIMEOUT, settings.PMEM_LLM_MAX_TOKENS = 120.0, 256
    url = f"/api/v1/namespaces/{ns.name}/"
    started = time.monotonic()
    one = api.post(url + "answer/", {"query": "Who is the project lead?"}, format="json")
    served = [c for c in proxy.between(started, time.monotonic()) if c.status == 200]
    assert one.status_code == 200, one.content
    body = one.json()
    assert body["cost"]["chat_calls"] == 1 and len(served) == 1
    assert body["cost"]["prompt_tokens"] == served[0].prompt_tokens > 0
    assert "project_lead" in body["context"]

    started = time.monotonic()
    iterative = api.post(url + "answer/", {"query": "Where is mug 1 now?", "mode": "iterative"},
                         format="json")
    served = [c for c in proxy.between(started, time.monotonic()) if c.status == 200]
    assert iterative.status_code == 200, iterative.content
    body = iterative.json()
    # Up to three lookups, then an answer: at most four calls, each the server's.
    assert 1 <= body["cost"]["chat_calls"] == len(served) <= 4 and len(body["lookups"]) <= 3
    assert body["cost"]["prompt_tokens"] == sum(c.prompt_tokens for c in served)

    raw = api.post(url + "read/", {"query": "Where is mug 1?", "mode": "raw", "k": 4},
                   format="json").json()
    started = time.monotonic()
    pruned = api.post(url + "read/", {"query": "Where is mug 1?", "mode": "pruned", "k": 4},
                      format="json")
    served = [c for c in proxy.between(started, time.monotonic()) if c.status == 200]
    assert pruned.status_code == 200, pruned.content
    kept = {i["id"] for i in pruned.json()["items"]}
    assert kept <= {i["id"] for i in raw["items"]}
    assert len(served) <= 6  # one yes/no per pair of the 4 with different dates, at most
    assert len(raw["items"]) - len(kept) <= len(served)
