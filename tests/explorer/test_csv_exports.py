"""No CSV export holds a cell a spreadsheet would run (CONTRACT, "Input that is refused"):
the black-box probe's =HYPERLINK value, and every other start OWASP names, in each export."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from django.test import Client

from memory.domain.spreadsheet import FORMULA_STARTS, inert_cell
from memory.services import observation_ingest, operation_apply

pytestmark = pytest.mark.django_db

PROBE = '=HYPERLINK("http://evil.example/x","click")'
#: One value per dangerous start (the tab and the carriage return before a formula too).
VALUES = [PROBE, "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1:A2)", "\t=1+1", "\r=2+2"]


def _csv(response: Any) -> list[list[str]]:
    body = b"".join(response.streaming_content).decode()
    return list(csv.reader(io.StringIO(body, newline="")))


def _runs(cell: str) -> bool:
    return cell.startswith(FORMULA_STARTS)


@pytest.fixture
def reviewer(ns: Any, make_user: Any) -> Client:
    client = Client()
    client.force_login(make_user("reviewer", ns))
    return client


@pytest.fixture
def hostile(ns: Any) -> Any:
    """A key whose every version holds a formula, one operation whose reason is one, and an
    observation whose source is one."""
    for value in VALUES:
        operation_apply(namespace=ns, key="k", op="accept", value=value, actor="user:t",
                        reason="=1+1", explicit=True)
    observation_ingest(namespace=ns, facts=[{"key": "other", "value": PROBE}], source="@evil")
    return ns


def test_the_cell_history_export_neutralises_every_formula(reviewer: Client, hostile: Any) -> None:
    rows = _csv(reviewer.get(f"/ns/{hostile.name}/cells/k/export.csv"))
    values = [row[1] for row in rows[1:]]
    assert sorted(values) == sorted("'" + v for v in VALUES)
    assert not any(_runs(cell) for row in rows for cell in row)


def test_the_frontier_export_neutralises_every_formula(reviewer: Client, hostile: Any) -> None:
    rows = _csv(reviewer.get(f"/ns/{hostile.name}/export/frontier.csv"))
    assert {row[0]: row[1] for row in rows[1:]} == {"k": "'" + VALUES[-1], "other": "'" + PROBE}
    assert not any(_runs(cell) for row in rows for cell in row)


def test_the_log_export_neutralises_values_reasons_and_sources(reviewer: Client,
                                                              hostile: Any) -> None:
    rows = _csv(reviewer.get(f"/ns/{hostile.name}/operations/export.csv"))
    header, body = rows[0], rows[1:]
    column = {name: [row[header.index(name)] for row in body] for name in header}
    assert "'" + PROBE in column["value"] and "'=1+1" in column["reason"]
    assert "'@evil" in column["source"]
    assert not any(_runs(cell) for row in rows for cell in row)


def test_json_exports_keep_the_values_as_they_are(reviewer: Client, hostile: Any) -> None:
    body = b"".join(reviewer.get(f"/ns/{hostile.name}/export/frontier.json")
                    .streaming_content).decode()
    assert {row["key"]: row["value"] for row in json.loads(body)}["other"] == PROBE


@pytest.mark.parametrize(("value", "cell"), [
    ("=1", "'=1"), ("+1", "'+1"), ("-1", "'-1"), ("@a", "'@a"), ("\t=1", "'\t=1"),
    ("\r=1", "'\r=1"), ("a=1", "a=1"), ("", ""), (-5, -5), (3, 3), (None, None), ("'=1", "'=1"),
])
def test_only_text_that_starts_like_a_formula_changes(value: Any, cell: Any) -> None:
    assert inert_cell(value) == cell
