"""A damaged file is refused with the line at fault, and writes nothing (CONTRACT "Export,
import and backup of a namespace"): truncated, reordered, a reference to a record the file
does not hold, a newer format version, and the other ways a file can be wrong."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest
from django.apps import apps

from memory.models import Namespace
from memory.services import (
    namespace_create,
    observation_ingest,
    operation_apply,
)
from memory.services.transfer import ImportRefused, namespace_export, namespace_import
from memory.services.transfer.schema import VERSION

pytestmark = pytest.mark.django_db


@pytest.fixture
def exported(tmp_path) -> list[str]:
    """The lines of a small namespace's export: two keys, a contest, a retraction."""
    ns = namespace_create(name="source-ns")
    observation_ingest(namespace=ns, facts=[{"key": "city", "value": "Rome"}], source="crm")
    observation_ingest(namespace=ns, facts=[{"key": "city", "value": "Paris"}])
    operation_apply(namespace=ns, key="city", op="contest", value="Oslo", actor="user:r")
    observation_ingest(namespace=ns, facts=[{"key": "pet", "value": "cat"}])
    operation_apply(namespace=ns, key="pet", op="revoke", actor="user:r")
    buffer = io.BytesIO()
    namespace_export(ns, buffer)
    return buffer.getvalue().decode().splitlines()


def rows() -> dict[str, int]:
    return {m._meta.db_table: m.objects.count() for m in apps.get_app_config("memory").get_models()}


def refused(tmp_path: Path, lines: list[str], *, raw: bytes | None = None,
            name: str = "copy-ns") -> ImportRefused:
    path = tmp_path / "damaged.ndjson"
    path.write_bytes(raw if raw is not None else ("\n".join(lines) + "\n").encode())
    existed = Namespace.objects.filter(name=name).exists()
    before = rows()
    with pytest.raises(ImportRefused) as caught:
        namespace_import(path, name=name)
    assert rows() == before, "a refused file wrote rows"
    assert Namespace.objects.filter(name=name).exists() == existed
    return caught.value


def line_of(lines: list[str], kind: str, nth: int = 0) -> int:
    """The index in ``lines`` of the nth record of ``kind``."""
    found = [i for i, line in enumerate(lines) if json.loads(line).get("type") == kind]
    return found[nth]


def test_a_file_cut_at_a_line_boundary_is_refused_at_its_end(exported, tmp_path):
    cut = exported[:-3]
    error = refused(tmp_path, cut)
    assert error.line == len(cut) + 1
    assert "the file ends where" in error.message and "cut short" in error.message


def test_a_file_cut_inside_a_line_is_refused_at_that_line(exported, tmp_path):
    text = ("\n".join(exported) + "\n").encode()
    at = text.index(exported[6].encode()) + 20
    error = refused(tmp_path, [], raw=text[:at])
    assert error.line == 7 and "cut short" in error.message


def test_a_cut_gzip_file_is_refused(exported, tmp_path):
    packed = gzip.compress(("\n".join(exported) + "\n").encode())
    error = refused(tmp_path, [], raw=packed[: len(packed) // 2])
    assert "compressed file is damaged or cut short" in error.message


def test_a_record_out_of_its_place_is_refused_at_its_line(exported, tmp_path):
    lines = list(exported)
    op = line_of(lines, "operation")
    moved = lines.pop(op)
    at = line_of(lines, "version")
    lines.insert(at, moved)  # an operation before the versions
    error = refused(tmp_path, lines)
    assert error.line == at + 1
    assert "operation records begin where 4 version records were due; found 0" in error.message


def test_a_record_of_an_earlier_type_after_a_later_one_is_refused(exported, tmp_path):
    lines = list(exported)
    moved = lines.pop(line_of(lines, "version"))
    lines.append(moved)  # a version after the tombstones
    error = refused(tmp_path, lines)
    assert "version records were due" in error.message


def test_swapped_records_of_one_type_are_refused_where_the_ids_fall(exported, tmp_path):
    lines = list(exported)
    a = line_of(lines, "version", 0)
    lines[a], lines[a + 1] = lines[a + 1], lines[a]
    error = refused(tmp_path, lines)
    assert error.line == a + 2 and "ids must rise" in error.message


def test_observations_out_of_seq_order_are_refused(exported, tmp_path):
    lines = list(exported)
    a = line_of(lines, "observation", 0)
    lines[a], lines[a + 1] = lines[a + 1], lines[a]
    error = refused(tmp_path, lines)
    assert error.line == a + 2 and "observation.seq" in error.message


@pytest.mark.parametrize(("kind", "field"), [("version", "cell"), ("support", "evidence"),
                                             ("span", "version"), ("operation", "evidence")])
def test_a_reference_to_a_missing_record_is_refused_at_its_line(exported, tmp_path, kind,
                                                                 field):
    lines = list(exported)
    at = line_of(lines, kind)
    record = json.loads(lines[at])
    record[field] = 999_999_999
    lines[at] = json.dumps(record)
    error = refused(tmp_path, lines)
    assert error.line == at + 1
    assert f"{kind}.{field} names" in error.message and "999999999" in error.message


def test_a_forward_reference_to_a_missing_record_is_refused_at_its_line(exported, tmp_path):
    """A cell names its head before the versions come: checked once they all have."""
    lines = list(exported)
    at = line_of(lines, "cell")
    record = json.loads(lines[at])
    record["head"] = 999_999_999
    lines[at] = json.dumps(record)
    error = refused(tmp_path, lines)
    assert error.line == at + 1 and "cell.head names version 999999999" in error.message


def test_an_id_inside_a_payload_that_names_nothing_is_refused(exported, tmp_path):
    lines = list(exported)
    at = next(i for i, line in enumerate(lines) if '"head_after"' in line)
    record = json.loads(lines[at])
    record["payload"]["head_after"] = 999_999_999
    lines[at] = json.dumps(record)
    error = refused(tmp_path, lines)
    assert error.line == at + 1 and "operation.payload names version" in error.message


def test_a_newer_format_version_is_refused_at_line_1(exported, tmp_path):
    header = json.loads(exported[0])
    header["version"] = VERSION + 1
    error = refused(tmp_path, [json.dumps(header), *exported[1:]])
    assert error.line == 1 and f"format version {VERSION + 1} is newer" in error.message


@pytest.mark.parametrize(("edit", "words"), [
    (lambda r: r.update(value=None), "version.value must not be null"),
    (lambda r: r.update(status="lost"), "version.status must be one of"),
    (lambda r: r.update(valid_from="yesterday"), "version.valid_from must be an ISO 8601"),
    (lambda r: r.update(valid_from="2026-01-01T10:00:00"), "with a zone"),
    (lambda r: r.update(ordinal="1"), "version.ordinal must be an integer"),
    (lambda r: r.update(colour="red"), "unknown field 'colour'"),
    (lambda r: r.pop("support"), "missing field 'support'"),
    (lambda r: r.update(value="a\x00b"), "NUL"),
])
def test_a_record_with_a_wrong_field_is_refused_at_its_line(exported, tmp_path, edit, words):
    lines = list(exported)
    at = line_of(lines, "version")
    record = json.loads(lines[at])
    edit(record)
    lines[at] = json.dumps(record)
    error = refused(tmp_path, lines)
    assert error.line == at + 1 and words in error.message


def test_a_line_that_is_not_json_is_refused_at_its_line(exported, tmp_path):
    lines = list(exported)
    lines[4] = lines[4][:-1]
    error = refused(tmp_path, lines)
    assert error.line == 5 and "not valid JSON" in error.message


@pytest.mark.parametrize("header", [
    '{"format": "something-else", "version": 1}', "[1, 2]", "not json",
    '{"format": "pmem-export", "version": 1, "namespace": "x", "counts": {"namespace": 1}}',
])
def test_a_file_that_is_not_an_export_is_refused_at_line_1(exported, tmp_path, header):
    error = refused(tmp_path, [header, *exported[1:]])
    assert error.line == 1


def test_an_existing_name_is_refused_and_the_namespace_left_alone(exported, tmp_path):
    namespace_create(name="taken")
    assert "exists already" in refused(tmp_path, exported, name="taken").message
    assert "exists already" in refused(tmp_path, exported, name="source-ns").message


def test_a_file_the_database_refuses_writes_nothing(exported, tmp_path):
    """Two heads in one key pass every check of the file but not the database's constraint:
    the transaction is rolled back whole."""
    lines = list(exported)
    for at in range(1, len(lines)):
        record = json.loads(lines[at])
        if record["type"] == "version" and record["status"] == "superseded":
            record["status"] = "active"
            lines[at] = json.dumps(record)
            break
    else:
        pytest.fail("no superseded version to edit")
    error = refused(tmp_path, lines)
    assert "the database refused" in error.message and "one_head_per_key" in error.message


def test_an_observation_id_given_twice_is_refused_at_the_second(exported, tmp_path):
    lines = list(exported)
    first, second = line_of(lines, "observation", 0), line_of(lines, "observation", 1)
    record = json.loads(lines[second])
    record["id"] = json.loads(lines[first])["id"]
    lines[second] = json.dumps(record)
    error = refused(tmp_path, lines)
    assert error.line == second + 1 and "appears twice" in error.message


@pytest.mark.parametrize(("field", "value"), [("source", "s" * 201),
                                              ("facts", [{"key": "k", "value": "a\u0000b"}])])
def test_a_value_the_database_cannot_hold_writes_nothing(exported, tmp_path, field, value):
    lines = list(exported)
    at = line_of(lines, "observation")
    record = json.loads(lines[at])
    record[field] = value
    lines[at] = json.dumps(record)
    # Refused by the check, with the API's limits, before the database could refuse it.
    error = refused(tmp_path, lines)
    assert error.line == at + 1 and f"observation.{field}" in error.message
