"""Read modes come from one registry (memory.reads.READ_MODES): the API offers exactly its
modes, each with its default k, and refuses any other."""

from __future__ import annotations

import json

import pytest

from memory.reads import ANSWER_MODES, READ_MODES
from memory.services import observation_ingest

pytestmark = pytest.mark.django_db


def read(api, ns, body):
    return api.post(f"/api/v1/namespaces/{ns.name}/read/", json.dumps(body),
                    content_type="application/json")


def test_every_registered_mode_reads_through_the_api(api, ns):
    for i in range(15):
        observation_ingest(namespace=ns, facts=[{"key": f"item_{i}_location", "value": "shelf"}])
    for name, mode in READ_MODES.items():
        body = read(api, ns, {"query": "item location", "mode": name}).json()
        assert body["mode"] == name
        if not mode.needs_model:  # a model mode says it needs one (test_api, test_model_reads)
            assert len(body["items"]) == mode.default_k


def test_a_mode_outside_the_registry_is_refused_naming_the_field(api, ns):
    response = read(api, ns, {"query": "q", "mode": "telepathy"})
    assert response.status_code == 400 and response.json()["field"] == "mode"
    assert "iterative" in ANSWER_MODES and "iterative" not in READ_MODES
