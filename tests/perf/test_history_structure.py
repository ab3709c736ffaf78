"""Long histories cost what short ones do (SPEC §10), asserted structurally: for a key of 100
versions and one of 20,000, every read of the API issues the same statements with the same
plans (EXPLAIN, costs off, literals blanked). The big key is written with set-based SQL
(bench/history_seed.py), as the commit writes it. No wall-clock assertions: ``pmem_bench
history`` measures the times.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from bench.history_seed import seed_cells, seed_key
from memory.models import Version
from memory.services import token_create

pytestmark = pytest.mark.django_db

SMALL, BIG = 100, 20_000


def _shape(sql: str) -> str:
    sql = re.sub(r"'(?:[^']|'')*'", "?", sql)
    sql = re.sub(r"\b\d+(\.\d+)?\b", "?", sql)
    sql = re.sub(r"\?(::[\w ]+(\[\])?)+", "?", sql)
    return re.sub(r"(\?\s*,\s*)+\?", "?", sql)


def _plan(sql: str, *, seqscan: bool = True) -> list[str]:
    """The plan's node types and the indexes they use, top to bottom. ``seqscan=False`` asks
    for the plan with sequential scans priced out: a Seq Scan left in it is one that no index
    can replace (a table an earlier test left small may rightly be scanned otherwise)."""
    with connection.cursor() as cur:
        if not seqscan:
            cur.execute("SET enable_seqscan = off")
        try:
            cur.execute("EXPLAIN (COSTS OFF) " + sql)
            lines = [r[0] for r in cur.fetchall()]
        finally:
            if not seqscan:
                cur.execute("RESET enable_seqscan")
    return [_shape(re.sub(r"\s+", " ", line.split("Filter:")[0]).strip())
            for line in lines if "->" in line or not line.startswith(" ")]


def _statements(fn: Callable[[], object]) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        fn()
    return [q["sql"] for q in captured.captured_queries]


@pytest.fixture
def keys(ns):
    small = seed_key(ns, "short", SMALL)
    big = seed_key(ns, "long", BIG)
    with connection.cursor() as cur:
        cur.execute("ANALYZE memory_version; ANALYZE memory_versionspan;"
                    " ANALYZE memory_operation; ANALYZE memory_supportedge; ANALYZE memory_cell")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token_create(namespace=ns, client='t').key}")
    return ns, api, small, big


def _mid(cell) -> Version:
    return Version.objects.get(cell=cell, ordinal=cell.version_count // 2)


REQUESTS: dict[str, Callable[..., str]] = {
    "cell": lambda ns, c, mid: f"/api/v1/namespaces/{ns.name}/cells/{c.key}/",
    "cell_as_of": lambda ns, c, mid:
        f"/api/v1/namespaces/{ns.name}/cells/{c.key}/?as_of={mid.created_at.isoformat()}",
    "history": lambda ns, c, mid: f"/api/v1/namespaces/{ns.name}/cells/{c.key}/history/",
    "history_cursor": lambda ns, c, mid:
        f"/api/v1/namespaces/{ns.name}/cells/{c.key}/history/?before={c.pk}-{mid.ordinal}",
    "history_as_of": lambda ns, c, mid: f"/api/v1/namespaces/{ns.name}/cells/{c.key}/history/"
        f"?as_of={mid.created_at.isoformat()}&limit=20",
    "graph": lambda ns, c, mid: f"/api/v1/namespaces/{ns.name}/cells/{c.key}/graph/",
    "graph_around": lambda ns, c, mid:
        f"/api/v1/namespaces/{ns.name}/cells/{c.key}/graph/?around={mid.id}&limit=30",
    "graph_as_of": lambda ns, c, mid: f"/api/v1/namespaces/{ns.name}/cells/{c.key}/graph/"
        f"?as_of={mid.created_at.isoformat()}",
    "timeline": lambda ns, c, mid: f"/api/v1/namespaces/{ns.name}/cells/{c.key}/timeline/",
    "timeline_as_of": lambda ns, c, mid: f"/api/v1/namespaces/{ns.name}/cells/{c.key}/"
        f"timeline/?as_of={mid.created_at.isoformat()}",
}


@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_reads_of_a_long_history_issue_the_statements_and_plans_of_a_short_one(keys, name):
    ns, api, small, big = keys
    runs = {}
    for cell in (small, big):
        url = REQUESTS[name](ns, cell, _mid(cell))
        _ok(api.get(url.replace("+00:00", "Z")))  # warm: the token's last use is written once
        statements = _statements(lambda url=url: _ok(api.get(url.replace("+00:00", "Z"))))
        runs[cell.key] = statements
    short, long = runs["short"], runs["long"]
    assert len(short) == len(long), (name, [s[:90] for s in long])
    assert [_shape(s) for s in short] == [_shape(s) for s in long]
    # 13: the graph as of a time also reads the ordinal of the version it opens around.
    assert len(long) <= 13, [s[:90] for s in long]
    for a, b in zip(short, long, strict=True):
        if a.lstrip().upper().startswith(("SELECT", "WITH")):
            plan = _plan(b)
            assert _plan(a) == plan, (name, a[:200])
            # and no plan reads a whole table of the graph (a hash of every operation, say)
            indexed = _plan(b, seqscan=False)
            assert not [line for line in indexed if re.search(
                r"Seq Scan on memory_(version|versionspan|operation|supportedge|evidence|"
                r"tombstone)\b", line)], (name, b[:300], indexed)


def _ok(response) -> object:
    assert response.status_code == 200, response.content[:300]
    return response


def test_a_long_history_answer_is_as_big_as_a_short_ones(keys):
    ns, api, small, big = keys
    sizes = {}
    for cell in (small, big):
        for part in ("", "history/", "graph/"):
            body = _ok(api.get(f"/api/v1/namespaces/{ns.name}/cells/{cell.key}/{part}"))
            sizes[(cell.key, part)] = len(body.content)
    for part in ("", "history/", "graph/"):
        assert sizes[("long", part)] < 1.2 * sizes[("short", part)] + 200, sizes


def test_the_history_query_is_a_keyset_never_an_offset(keys):
    ns, api, small, big = keys
    statements = _statements(lambda: _ok(api.get(
        f"/api/v1/namespaces/{ns.name}/cells/long/history/?before={big.pk}-{BIG - 100}")))
    assert not [s for s in statements if " OFFSET " in s.upper()]
    page = [s for s in statements if "memory_version v" in s and "ordinal" in s]
    assert page and all("ORDER BY v.ordinal DESC LIMIT" in s for s in page)


def test_the_frontier_as_of_reads_a_page_not_the_namespace(ns):
    between, after = seed_cells(ns, 2000, prefix="k_")
    with connection.cursor() as cur:
        cur.execute("ANALYZE memory_cell; ANALYZE memory_version; ANALYZE memory_versionspan")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token_create(namespace=ns, client='t').key}")
    url = f"/api/v1/namespaces/{ns.name}/cells/?as_of={between.isoformat()}&limit=20"
    _ok(api.get(url.replace("+00:00", "Z")))
    statements = _statements(lambda: _ok(api.get(url.replace("+00:00", "Z"))))
    body = api.get(url.replace("+00:00", "Z")).json()
    assert [r["value"] for r in body["results"][:2]] == ["first 1", "first 2"]
    frontier = [s for s in statements if "memory_versionspan" in s]
    assert len(frontier) == 1
    plan = _plan(frontier[0])
    assert not [line for line in plan if "Seq Scan on memory_version" in line
                or "Seq Scan on memory_cell" in line], plan
