"""A chat session travels (format version 3): an observation's messages come back from an
export and an import exactly as stored, and a namespace without any is still written in the
oldest version that holds it."""

from __future__ import annotations

import io
import json

import pytest

from memory.domain.conversation import observation_text
from memory.models import Evidence
from memory.services import namespace_create, observation_ingest
from memory.services.transfer import namespace_export, namespace_import
from tests.support.transfer import api_for

pytestmark = pytest.mark.django_db

SESSION = [{"role": "user", "name": "Caroline", "content": "I moved to Lisbon.\nIt's sunny.",
            "at": "2023-05-08T13:56:00Z"},
           {"role": "assistant", "content": "home_city: Lisbon", "at": "2023-05-08T13:57:00Z"}]


def export_lines(ns) -> list[dict]:
    buffer = io.BytesIO()
    namespace_export(ns, buffer)
    return [json.loads(line) for line in buffer.getvalue().decode().splitlines()]


def test_messages_round_trip_exactly(tmp_path):
    ns = namespace_create(name="chatty-ns")
    api = api_for(ns)
    sent = api.post(f"/api/v1/namespaces/{ns.name}/observations/?wait=1",
                    {"text": "Session 1", "messages": SESSION}, format="json").json()
    observation_ingest(namespace=ns, text="plain note")
    lines = export_lines(ns)
    assert lines[0]["version"] == 3
    observations = [r for r in lines if r.get("type") == "observation"]
    assert [o["messages"] for o in observations] == [SESSION, None]
    path = tmp_path / "chatty.ndjson"
    path.write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    copy = namespace_import(path, name="chatty-copy").namespace
    before = list(Evidence.objects.filter(namespace=ns).order_by("seq")
                  .values_list("text", "messages", "observed_at"))
    after = list(Evidence.objects.filter(namespace=copy).order_by("seq")
                 .values_list("text", "messages", "observed_at"))
    assert after == before
    assert after[0][0] == observation_text("Session 1", SESSION) == sent["text"]
    shown = api_for(copy).get(f"/api/v1/namespaces/{copy.name}/observations/"
                              f"{Evidence.objects.get(namespace=copy, seq=sent['seq']).pk}/")
    assert shown.json()["messages"] == SESSION


def test_a_namespace_without_messages_is_written_in_an_older_version():
    ns = namespace_create(name="quiet-ns")
    observation_ingest(namespace=ns, text="plain note")
    assert export_lines(ns)[0]["version"] == 1
