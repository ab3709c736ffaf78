"""The API with a real Celery worker: wait=1, polling, and nothing acknowledged is lost when the
worker is SIGKILLed mid-stream."""

from __future__ import annotations

import json

import pytest

from memory.models import Evidence, Operation, Version
from tests.support.worker import (  # noqa: F401 - fixtures
    celery_worker_proc,
    llm_server,
    wait_until,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def post(api, ns, body, query=""):
    return api.post(f"/api/v1/namespaces/{ns.name}/observations/{query}", json.dumps(body),
                    content_type="application/json")


def test_wait_blocks_until_the_worker_committed_and_returns_operations(
        make_namespace, client_for, celery_worker_proc, llm_server, settings):  # noqa: F811
    # With a model configured the request cannot commit it itself (the worker extracts and
    # plans), so the answer is the worker's commit, heard through its notice. The text is
    # wholly understood by the rules: the model is not called.
    settings.PMEM_LLM_BASE_URL, settings.PMEM_LLM_MODEL = llm_server.base_url, llm_server.model
    celery_worker_proc(llm=llm_server)
    ns = make_namespace("wait")
    api = client_for(ns)
    r = post(api, ns, {"text": "Update: mug 1 has been moved from table 1 to shelf 2."}, "?wait=1")
    assert r.status_code == 201, r.json()
    body = r.json()
    assert body["status"] == "committed"
    assert [(o["op"], o["key"], o["value"], o["status"]) for o in body["operations"]] == [
        ("accept", "mug_1_location", "shelf 2", "active")]


def test_polling_sees_pending_then_committed(make_namespace, client_for, celery_worker_proc):  # noqa: F811
    ns = make_namespace("poll")
    api = client_for(ns)
    r = post(api, ns, {"facts": [{"key": "a", "value": "1"}, {"key": "b", "value": "2"}]})
    assert r.status_code == 202 and r.json()["status"] == "pending"
    url = f"/api/v1/namespaces/{ns.name}/observations/{r.json()['id']}/"
    assert api.get(url).json()["status"] == "pending"  # no worker yet: stored, waiting
    celery_worker_proc()
    wait_until(lambda: api.get(url).json()["status"] == "committed", message="commit")
    assert len(api.get(url).json()["operations"]) == 2


def test_a_worker_killed_mid_stream_loses_and_duplicates_nothing(
        make_namespace, client_for, celery_worker_proc):  # noqa: F811
    worker = celery_worker_proc(concurrency=1)
    ns = make_namespace("kill")
    api = client_for(ns)
    ids = [post(api, ns, {"facts": [{"key": f"k{i % 3}", "value": f"v{i}"},
                                    {"key": f"other{i}", "value": "x"}]}).json()["id"]
           for i in range(24)]
    wait_until(lambda: Evidence.objects.filter(pk__in=ids, state="committed").exists(),
               message="some commits")
    worker.kill_hard()
    worker.restart()
    wait_until(lambda: Evidence.objects.filter(pk__in=ids, state="committed").count() == 24,
               timeout=60, message="all 24 committed")
    assert Operation.objects.filter(evidence_id__in=ids).exclude(type="reinstate").count() == 48
    for i in range(3):
        heads = Version.objects.filter(cell__namespace=ns, cell__key=f"k{i}",
                                       status__in=["active", "contested"])
        assert heads.count() == 1
    assert Version.objects.get(cell__namespace=ns, cell__key="k2", status="active").value == "v23"
