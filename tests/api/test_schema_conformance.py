"""Every endpoint's real answers against the served OpenAPI schema, strictly: each field an
answer carries is declared, each field the schema requires is there, each value has the
declared type (tests/support/openapi.py). The schema is what the output serializers declare,
and the answers are what they render: a field added to one and not the other fails here."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from memory.models import Operation
from memory.services import (
    observation_fail,
    observation_ingest,
    observation_record,
    operation_apply,
    token_create,
)
from tests.support.openapi import Schema
from tests.support.scripted_llm import scripted_llm  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db

API = "/api/v1"


@pytest.fixture(scope="module")
def served(django_db_blocker: Any) -> Schema:
    with django_db_blocker.unblock():
        return Schema(Client().get("/api/schema/?format=json").json())


class Checked:
    """An API client whose every answer is validated against the operation it reached."""

    def __init__(self, schema: Schema, api: APIClient) -> None:
        self.schema, self.api, self.seen = schema, api, set[tuple[str, str, int]]()

    def __call__(self, method: str, url: str, data: Any = None, *, status: int,
                 template: str) -> Any:
        response = getattr(self.api, method)(url, data, format="json")
        assert response.status_code == status, (url, response.status_code, response.content)
        self.seen.add((template, method, status))
        if status == 204:
            return None
        body = response.json()
        self.schema.validate(template, method, status, body)
        return body


def _seed(ns: Any) -> None:
    """A namespace whose answers hold every kind of node and row: a contest with its
    alternative, a retraction's tombstone, text and structured observations, an alias."""
    for value in ("table 1", "shelf 2"):
        observation_ingest(namespace=ns, text=f"The mug is on {value}.",
                           facts=[{"key": "mug_location", "value": value}])
    operation_apply(namespace=ns, key="mug_location", op="revoke", actor="user:t",
                    reason="reported in error")
    operation_apply(namespace=ns, key="alice_city", op="accept", value="Oslo", actor="user:t")
    operation_apply(namespace=ns, key="alice_city", op="contest", value="Bergen",
                    actor="user:t")


@pytest.fixture
def checked(ns: Any, served: Schema, commit_pending: Any) -> Checked:
    _seed(ns)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token_create(namespace=ns, scope='review').key}")
    return Checked(served, api)


def test_every_endpoint_answers_what_the_schema_declares(checked: Checked, ns: Any,
                                                         commit_pending: Any,
                                                         settings: Any) -> None:
    base, n = f"{API}/namespaces/{ns.name}", "/api/v1/namespaces/{ns}"
    c = checked
    c("get", f"{API}/whoami/", status=200, template="/api/v1/whoami/")
    # Observations: accepted, committed (a replay answers at once), read, retried.
    obs = f"{n}/observations/"
    first = c("post", f"{base}/observations/", {
        "text": "Alice moved to Bergen.", "facts": [{"key": "alice_city", "value": "Bergen"}],
        "source": "chat", "idempotency_key": "k1", "observed_at": "2026-01-02T03:04:05Z"},
        status=202, template=obs)
    commit_pending()
    c("post", f"{base}/observations/?wait=1", {
        "text": "Alice moved to Bergen.", "facts": [{"key": "alice_city", "value": "Bergen"}],
        "source": "chat", "idempotency_key": "k1", "observed_at": "2026-01-02T03:04:05Z"},
        status=201, template=obs)
    c("get", f"{base}/observations/{first['id']}/", status=200, template=f"{n}/observations/{{id}}/")
    # A chat session, and a batch: accepted, then committed; a bad item and a reused key.
    session = c("post", f"{base}/observations/?wait=1", {"messages": [
        {"role": "user", "name": "Ann", "content": "Hi", "at": "2026-01-02T03:04:05+01:00"},
        {"role": "assistant", "content": "Hello"}]}, status=201, template=obs)
    c("get", f"{base}/observations/{session['id']}/", status=200,
      template=f"{n}/observations/{{id}}/")
    batch = f"{n}/observations/batch/"
    items = [{"text": "one", "idempotency_key": "b1"}, {"messages": [
        {"role": "user", "content": "two"}], "idempotency_key": "b2"}]
    c("post", f"{base}/observations/batch/", {"observations": items}, status=202,
      template=batch)
    c("post", f"{base}/observations/batch/?wait=1", {"observations": [{"text": "three"}]},
      status=201, template=batch)
    c("post", f"{base}/observations/batch/", {"observations": [{"text": ""}]}, status=400,
      template=batch)
    c("post", f"{base}/observations/batch/", {"observations": [
        {"text": "changed", "idempotency_key": "b1"}]}, status=409, template=batch)
    failed = observation_record(namespace=ns, text="nothing", actor="api").evidence
    observation_fail(evidence_id=failed.pk, error="a model said no")
    retry = f"{n}/observations/{{id}}/retry/"
    c("post", f"{base}/observations/{failed.pk}/retry/", status=202, template=retry)
    c("post", f"{base}/observations/{failed.pk}/retry/", status=409, template=retry)
    # Cells, now and as of T; the cell's history, graph and timeline.
    cells = f"{n}/cells/"
    c("get", f"{base}/cells/", status=200, template=cells)
    then = Operation.objects.filter(namespace=ns).order_by("id")[2].created_at.isoformat()
    c("get", f"{base}/cells/?as_of={then.replace('+00:00', 'Z')}", status=200, template=cells)
    for key in ("mug_location", "alice_city"):
        cell = f"{n}/cells/{{key}}/"
        c("get", f"{base}/cells/{key}/", status=200, template=cell)
        c("get", f"{base}/cells/{key}/?as_of={then.replace('+00:00', 'Z')}", status=200,
          template=cell)
        graph = c("get", f"{base}/cells/{key}/graph/", status=200, template=f"{cell}graph/")
        c("get", f"{base}/cells/{key}/history/?search=shelf", status=200,
          template=f"{cell}history/")
        c("get", f"{base}/cells/{key}/timeline/", status=200, template=f"{cell}timeline/")
        if key == "mug_location":
            assert {node["kind"] for node in graph["nodes"]} == {
                "version", "evidence", "operation", "tombstone"}
    c("get", f"{base}/cells/nothing/", status=404, template=f"{n}/cells/{{key}}/")
    c("get", f"{base}/cells/mug_location/history/?before=x", status=400,
      template=f"{n}/cells/{{key}}/history/")
    c("get", f"{base}/cells/?as_of=yesterday", status=400, template=cells)
    ops = f"{n}/cells/{{key}}/operations/"
    c("post", f"{base}/cells/alice_city/operations/", {"op": "resolve", "value": "Bergen",
                                                       "reason": "asked her"},
      status=201, template=ops)
    c("post", f"{base}/cells/alice_city/operations/", {"op": "resolve", "value": "Oslo"},
      status=409, template=ops)
    c("get", f"{base}/operations/?limit=2", status=200, template=f"{n}/operations/")
    c("get", f"{base}/changes/?limit=5", status=200, template=f"{n}/changes/")
    c("get", f"{base}/changes/?limit=0", status=400, template=f"{n}/changes/")
    # Reads in every mode that needs no model, now and as of T.
    for mode in ("frontier", "raw", "evidence", "raw_ordered"):
        c("post", f"{base}/read/", {"query": "where is the mug", "mode": mode,
                                    "disclose": ["support", "alternatives", "history"]},
          status=200, template=f"{n}/read/")
    c("post", f"{base}/read/", {"query": "alice", "as_of": then}, status=200,
      template=f"{n}/read/")
    c("post", f"{base}/read/", {"query": "alice", "mode": "pruned"}, status=200,
      template=f"{n}/read/")  # without a model: available false, with a note
    c("post", f"{base}/answer/", {"query": "where is the mug"}, status=409,
      template=f"{n}/answer/")
    c("delete", f"{base}/cells/alice_city/?report=1", status=200, template=f"{n}/cells/{{key}}/")
    c("delete", f"{base}/cells/mug_location/", status=204, template=f"{n}/cells/{{key}}/")
    c("get", f"{API}/namespaces/?limit=1", status=200, template="/api/v1/namespaces/")
    c("delete", f"{base}/?report=1", status=200, template=f"{n}/")
    declared = {(path, method) for path, item in c.schema.served["paths"].items()
                for method in item if path.startswith("/api/v1/")}
    reached = {(path, method) for path, method, _ in c.seen}
    # Answered elsewhere: the export streams NDJSON (tests/transfer), the model's answer needs
    # a model (below).
    assert declared - reached == {(f"{n}/export/", "get")}, declared - reached


def test_the_answer_step_answers_what_the_schema_declares(checked: Checked, ns: Any,
                                                         settings: Any,
                                                         scripted_llm: Any) -> None:  # noqa: F811
    settings.PMEM_LLM_BASE_URL = scripted_llm.base_url
    settings.PMEM_LLM_MODEL = "scripted"
    settings.PMEM_LLM_MAX_RETRIES = 0
    settings.PMEM_LLM_TIMEOUT = 5.0
    scripted_llm.reply("answer", "shelf 2")
    n = "/api/v1/namespaces/{ns}"
    body = checked("post", f"{API}/namespaces/{ns.name}/answer/", {"query": "where is the mug"},
                   status=200, template=f"{n}/answer/")
    assert body["answer"] == "shelf 2" and body["mode"] == "frontier"
    scripted_llm.reply("readout", {"action": "lookup", "entity": "alice", "relation": "city"},
                       {"action": "answer", "answer": "Bergen"})
    body = checked("post", f"{API}/namespaces/{ns.name}/answer/",
                   {"query": "alice", "mode": "iterative"}, status=200, template=f"{n}/answer/")
    assert body["mode"] == "iterative" and body["lookups"][0]["entity"] == "alice"


def test_an_undeclared_field_fails_the_check(served: Schema) -> None:
    """The check is strict: the schema of a cell refuses a field it does not declare, and a
    cell without a required field."""
    cell = {"key": "k", "value": None, "status": "empty", "version": None, "support": 0,
            "alternatives": [], "history": [], "history_total": 0, "history_next": None,
            "aliases": [], "rendered": "k: (empty)"}
    template = "/api/v1/namespaces/{ns}/cells/{key}/"
    served.validate(template, "get", 200, cell)
    with pytest.raises(Exception, match=re.escape("'surprise'")):
        served.validate(template, "get", 200, {**cell, "surprise": 1})
    with pytest.raises(Exception, match="'rendered' is a required property"):
        served.validate(template, "get", 200, {k: v for k, v in cell.items() if k != "rendered"})
