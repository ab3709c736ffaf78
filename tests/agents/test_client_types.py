"""pmem_client's typed results follow the served OpenAPI schema: every field a result names is a
field of the answer it is parsed from, with a compatible type; every field the schema requires
is either a field of the result or one the client deliberately leaves in ``raw`` (listed here,
so that a new answer field is a decision, not a drift)."""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
from typing import Any

import pytest
from django.test import Client

import pmem_client.types as t

pytestmark = pytest.mark.django_db

#: Each result type and the schema component of the answer it parses.
PARSED_FROM: dict[type, str] = {
    t.Whoami: "WhoAmIOut", t.ObservationOperation: "OperationSummaryOut",
    t.Observation: "ObservationOut", t.Alternative: "AlternativeOut",
    t.HistoryEntry: "VersionOut", t.HistoryPage: "HistoryPageOut", t.Cell: "CellOut",
    t.Operation: "OperationOut", t.ReadResult: "ReadOut", t.EraseReport: "EraseReportOut",
    t.NamespaceInfo: "NamespaceRowOut", t.NamespaceDeleted: "NamespaceDeletedOut",
}
#: Answer fields the client leaves in ``raw`` (a caller reads them there).
LEFT_IN_RAW: dict[str, set[str]] = {
    "WhoAmIOut": {"name", "prefix", "expires_at"},
    "ObservationOut": {"extraction"},
    "CellOut": {"rendered"},
    "NamespaceDeletedOut": {"deleted"},
    "OperationOut": {"raw_output", "payload"},
    "HistoryPageOut": {"next_url"},
    "EraseReportOut": {"versions_erased", "mentions_truncated", "values_unsearched",
                       "values_unsearched_by_reason"},
}
#: Nullable answer fields a result reads as a plain value (and what null becomes).
NULL_READ_AS: dict[tuple[str, str], object] = {
    ("AlternativeOut", "support"): 0,  # an alternative as of a past time: its support unknown
    ("WhoAmIOut", "namespace"): "",  # an application token reaches a prefix, not one namespace
}
JSON_TYPES: dict[type, set[str]] = {
    str: {"string"}, int: {"integer"}, bool: {"boolean"}, float: {"number", "integer"},
    datetime.datetime: {"string"}, list: {"array"}, tuple: {"array"}, dict: {"object"},
}


@pytest.fixture(scope="module")
def schema(django_db_blocker: Any) -> dict[str, Any]:
    with django_db_blocker.unblock():
        return Client().get("/api/schema/?format=json").json()


def _resolved(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    if "allOf" in node and len(node["allOf"]) == 1:
        return _resolved(schema, node["allOf"][0])
    return node


def _python_types(annotation: Any) -> tuple[set[type], bool]:
    """The plain types an annotation allows, and whether it allows None."""
    args = typing.get_args(annotation)
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        plain = {typing.get_origin(a) or a for a in args if a is not type(None)}
        return plain, type(None) in args
    return {typing.get_origin(annotation) or annotation}, False


def _sample(schema: dict[str, Any], name: str) -> dict[str, Any]:
    """A minimal answer of component ``name``: each required field with a value of its type."""
    values = {"integer": 1, "string": "x", "boolean": False, "array": [], "object": {}}
    component = schema["components"]["schemas"][name]
    return {field: values[_resolved(schema, component["properties"][field]).get("type", "string")]
            for field in component.get("required", ())}


@pytest.mark.parametrize("result", list(PARSED_FROM), ids=lambda r: r.__name__)
def test_each_result_type_names_the_fields_of_its_answer(schema: dict[str, Any],
                                                         result: type) -> None:
    name = PARSED_FROM[result]
    component = schema["components"]["schemas"][name]
    properties, required = component["properties"], set(component.get("required", ()))
    hints = typing.get_type_hints(result)
    fields = {f.name for f in dataclasses.fields(result) if f.name != "raw"}
    assert fields <= set(properties), f"{result.__name__} names {fields - set(properties)}"
    for field in fields:
        declared = _resolved(schema, properties[field])
        plain, optional = _python_types(hints[field])
        json_types = set().union(*(JSON_TYPES.get(p, {"object"}) for p in plain))
        assert declared.get("type", "string") in json_types, (result.__name__, field, declared)
        if (declared.get("nullable") or field not in required) and (name, field) not in NULL_READ_AS:
            # A value that may be null or absent: the client holds None, or a default.
            assert optional or any(f.name == field and (
                f.default is not dataclasses.MISSING
                or f.default_factory is not dataclasses.MISSING)
                for f in dataclasses.fields(result)), (result.__name__, field)
    for (component, field), plain in NULL_READ_AS.items():
        if component == name:
            assert result.from_json({**_sample(schema, component), field: None}) is not None
            assert getattr(result.from_json({**_sample(schema, component), field: None}),
                           field) == plain
    assert required - fields <= LEFT_IN_RAW.get(name, set()), (
        f"{name} requires {required - fields - LEFT_IN_RAW.get(name, set())}, which "
        f"{result.__name__} neither names nor leaves in raw on purpose")
