"""The erase's cost follows what is attached to the key, never the rest of the namespace:
the same statements whatever the namespace holds or the key's length, no sequential scan of
the evidence, versions or operations, no VACUUM in the request (SPEC §6; decisions "Privacy
erase")."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory.services import cell_erase, observation_ingest, observations_ingest, observations_record

pytestmark = pytest.mark.django_db


def _fill(ns, unrelated: int) -> None:
    """Unrelated evidence quoting the value that will be erased (mentions, not attached): a
    few committed observations of 30 facts of other keys each, and many recorded only."""
    observations_ingest(namespace=ns, observations=[
        {"text": f"not the Zanzibar-4471 one ({i})",
         "facts": [{"key": f"other_{j}", "value": f"thing {i}"} for j in range(30)]}
        for i in range(max(1, unrelated // 30))])
    observations_record(namespace=ns, observations=[
        {"text": f"later Zanzibar-4471 note {i}"} for i in range(unrelated)])


def _key(ns, versions: int) -> None:
    for i in range(versions):
        observation_ingest(namespace=ns, text=f"passcode: Zanzibar-{4471 + i}",
                           source="sms")


def _erase_statements(ns) -> list[str]:
    with CaptureQueriesContext(connection) as ctx:
        erased = cell_erase(namespace=ns, key="passcode", actor="user:t", report=True)
    assert erased.redacted_evidence >= 1 and erased.mentions.items
    return [q["sql"] for q in ctx.captured_queries]


def test_erase_statements_do_not_grow_with_the_namespace_or_the_key(make_namespace):
    counts = []
    for unrelated, versions in ((10, 2), (1000, 2), (10, 12)):
        ns = make_namespace("erase-shape")
        _fill(ns, unrelated)
        _key(ns, versions)
        counts.append(len(_erase_statements(ns)))
    assert counts[0] == counts[1] == counts[2], counts
    assert counts[0] <= 21, counts  # one of them the change feed's


def test_erase_plans_use_indexes_not_scans_and_never_vacuum(make_namespace):
    ns = make_namespace("erase-plan")
    _fill(ns, 3000)
    _key(ns, 3)
    with connection.cursor() as cur:
        cur.execute("ANALYZE memory_evidence, memory_version, memory_operation,"
                    " memory_supportedge, memory_cell")
    statements = _erase_statements(ns)
    assert not [s for s in statements if re.match(r"\s*VACUUM", s, re.I)]
    planned = 0
    with connection.cursor() as cur:
        for sql in statements:
            if "%b" in sql or not re.match(r"\s*(WITH|SELECT|UPDATE|DELETE)", sql, re.I):
                continue  # bound statements (by primary key from unnest) and inserts
            cur.execute("EXPLAIN " + sql)
            plan = "\n".join(row[0] for row in cur.fetchall())
            for table in ("memory_evidence", "memory_version", "memory_operation",
                          "memory_supportedge"):
                assert f"Seq Scan on {table}" not in plan, (sql, plan)
            planned += 1
    assert planned >= 5
