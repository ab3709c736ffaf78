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


def test_an_imported_session_is_read_by_its_turns_and_a_deleted_one_leaves_none(tmp_path):
    """The importer writes with the foreign-key triggers off (session_replication_role):
    the message rows the evidence read ranks come with the sessions all the same, and go
    with them."""
    from django.db import connection

    from memory.reads import read
    from memory.services import namespace_delete

    ns = namespace_create(name="turns-ns")
    observation_ingest(namespace=ns, messages=SESSION)
    path = tmp_path / "turns.ndjson"
    path.write_text("\n".join(json.dumps(r) for r in export_lines(ns)) + "\n")
    copy = namespace_import(path, name="turns-copy").namespace

    (item,) = read("evidence", namespace=copy, query="Lisbon sunny", k=1).items
    assert [m["index"] for m in item["messages"]] == [1]

    def rows() -> int:
        with connection.cursor() as cur:
            cur.execute("SELECT count(*) FROM memory_evidencemessage WHERE namespace_id = %s",
                        [copy.pk])
            return cur.fetchone()[0]

    assert rows() == len(SESSION)
    namespace_delete(namespace=copy, actor="user:t")
    assert rows() == 0
