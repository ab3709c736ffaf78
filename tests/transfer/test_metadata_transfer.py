"""Facts' metadata travels (format version 2): every version keeps its metadata through an
export and an import, filters answer the same on the copy, a namespace without metadata is
still written as version 1, and a file with metadata that is not flat is refused."""

from __future__ import annotations

import io
import json
from datetime import datetime

import pytest
from django.utils import timezone

from memory.services import namespace_create, observation_ingest, operation_apply
from memory.services.transfer import ImportRefused, namespace_export, namespace_import
from tests.support.transfer import api_for, reads

pytestmark = pytest.mark.django_db


def export_lines(ns) -> list[dict]:
    buffer = io.BytesIO()
    namespace_export(ns, buffer)
    return [json.loads(line) for line in buffer.getvalue().decode().splitlines()]


@pytest.fixture
def tagged() -> tuple:
    ns = namespace_create(name="tagged-ns")
    observation_ingest(namespace=ns, facts=[
        {"key": "food", "value": "sushi", "metadata": {"user": "alice", "turn": 1}},
        {"key": "pet", "value": "cat", "metadata": {"user": "bob", "sure": False}}])
    middle: datetime = timezone.now()
    observation_ingest(namespace=ns, facts=[
        {"key": "food", "value": "ramen", "metadata": {"user": "alice", "turn": 2.5}},
        {"key": "pet", "value": "dog", "op": "contest", "metadata": {"user": "carol"}}])
    operation_apply(namespace=ns, key="food", op="revoke", actor="user:t")
    return ns, middle


def test_metadata_round_trips_and_every_read_answers_the_same(tagged, tmp_path):
    ns, middle = tagged
    lines = export_lines(ns)
    assert lines[0]["version"] == 2
    versions = [r for r in lines if r.get("type") == "version"]
    assert [v["metadata"] for v in versions] == [
        {"user": "alice", "turn": 1}, {"user": "bob", "sure": False},
        {"user": "alice", "turn": 2.5},
        {"user": "carol", "sure": False}]  # the contest's candidate starts from the head's
    path = tmp_path / "tagged.ndjson"
    path.write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    copy = namespace_import(path, name="tagged-copy").namespace
    assert reads(copy, ["food", "pet"], [middle]) == reads(ns, ["food", "pet"], [middle])
    for namespace in (ns, copy):
        api = api_for(namespace)
        base = f"/api/v1/namespaces/{namespace.name}"
        listed = api.get(f"{base}/cells/", {"filter": json.dumps({"user": "alice"})}).json()
        assert [(c["key"], c["value"]) for c in listed["results"]] == [("food", "sushi")]
        read = api.post(f"{base}/read/", {"query": "pet", "filter": {"user": "bob"}},
                        format="json").json()
        assert [(i["key"], i["metadata"]) for i in read["items"]] == [
            ("pet", {"user": "bob", "sure": False})]


def test_a_namespace_without_metadata_is_written_as_version_1():
    ns = namespace_create(name="plain-ns")
    observation_ingest(namespace=ns, facts=[{"key": "food", "value": "sushi"}])
    lines = export_lines(ns)
    assert lines[0]["version"] == 1
    assert all("metadata" not in r for r in lines if r.get("type") == "version")


@pytest.mark.parametrize("metadata", [{"user": {"id": 1}}, ["alice"], {"k": None}])
def test_metadata_that_is_not_flat_is_refused_with_its_line(tagged, tmp_path, metadata):
    ns, _ = tagged
    lines = export_lines(ns)
    at = next(n for n, r in enumerate(lines) if r.get("type") == "version")
    lines[at]["metadata"] = metadata
    path = tmp_path / "edited.ndjson"
    path.write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    with pytest.raises(ImportRefused) as refused:
        namespace_import(path, name="edited-copy")
    assert refused.value.line == at + 1 and "version.metadata" in refused.value.message
