"""What keeps the write and read paths fast, asserted structurally.

``manage.py pmem_bench perf`` measures the times; these tests pin down why they hold: the
statements a commit issues do not grow with the observation's history or the namespace's, a
revoke does not walk the chain it retracts from, the reads do not grow with history, and the
frontier read's shape is one the HNSW index can serve. No wall-clock assertions: the machine
is shared.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext

from memory.domain import OpType
from memory.models import Cell, FrontierVector
from memory.selectors.cells import cell_detail, cell_lookup, cell_value
from memory.selectors.graph import WINDOW_MAX, graph_window
from memory.selectors.search import frontier_read, raw_read
from memory.services import observation_ingest, observations_ingest, operation_apply
from memory.services.frontier import frontier_flush

pytestmark = pytest.mark.django_db

FACTS = 30
#: Statements one observation of 30 facts may cost, end to end (record, extract, plan,
#: commit, embedding refresh; BEGIN/COMMIT included). It was 35 when this was first written,
#: 25 since the drain extracts inside its commit without a model, 21 since the
#: one-transaction ingest neither nests a savepoint nor re-reads the row it just inserted,
#: and checks what is ahead of it in its insert, 18 since it inserts the row
#: committed, locks own keys and aliases in one statement, takes new cells from their
#: insert and reads nothing back after its commit; 19 since the commit appends its change
#: events (SPEC §12: the cursors, the rows and the notice in one statement).
MAX_STATEMENTS_PER_OBSERVATION = 19


def _facts(keys: int, round_: int, first: int = 0) -> list[dict[str, str]]:
    return [{"key": f"entity_{(first + j) % keys}_attr", "value": f"value {round_} of {j}"}
            for j in range(FACTS)]


def _statements(fn, *args, **kwargs) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        fn(*args, **kwargs)
    return [q["sql"] for q in captured.captured_queries]


def _shape(sql: str) -> str:
    """A statement with its literals and number lists blanked (ids and values differ)."""
    sql = re.sub(r'"s\d+_x\d+"', '"savepoint"', sql)
    sql = re.sub(r"'(?:[^']|'')*'", "?", sql)
    sql = re.sub(r"\b\d+(\.\d+)?\b", "?", sql)
    sql = re.sub(r"\?(::\w+(\[\])?)+", "?", sql)  # the casts psycopg picks by value
    return re.sub(r"(\?\s*,\s*)+\?", "?", sql)


def test_statements_per_observation_are_bounded_and_flat_in_history(ns):
    # The first observation creates 30 cells; the later ones overwrite the same 30 keys, so
    # each cell's history grows 20-fold. The statement count must not follow it.
    first = _statements(observation_ingest, namespace=ns, facts=_facts(FACTS, 0))
    second = _statements(observation_ingest, namespace=ns, facts=_facts(FACTS, 1))
    for round_ in range(2, 20):
        observation_ingest(namespace=ns, facts=_facts(FACTS, round_))
    late = _statements(observation_ingest, namespace=ns, facts=_facts(FACTS, 20))
    assert len(first) <= MAX_STATEMENTS_PER_OBSERVATION
    assert len(late) <= MAX_STATEMENTS_PER_OBSERVATION
    assert len(late) == len(second)  # overwrites cost the same at 2 and 21 versions per cell
    assert [_shape(s) for s in late] == [_shape(s) for s in second]


def test_statements_per_observation_do_not_grow_with_the_namespace(ns):
    observation_ingest(namespace=ns, facts=_facts(10_000, 0, first=0))
    small = _statements(observation_ingest, namespace=ns, facts=_facts(10_000, 0, first=30))
    for i in range(2, 12):  # ten times as many cells in the namespace
        observation_ingest(namespace=ns, facts=_facts(10_000, 0, first=30 * i))
    large = _statements(observation_ingest, namespace=ns, facts=_facts(10_000, 0, first=30 * 12))
    assert len(large) == len(small)


def test_commit_does_not_read_the_cell_vectors(ns):
    observation_ingest(namespace=ns, facts=_facts(FACTS, 0))
    sqls = _statements(observation_ingest, namespace=ns, facts=_facts(FACTS, 1))
    locking = [s for s in sqls if "FOR UPDATE" in s and re.search(r'\bFROM "?memory_cell\b', s)]
    assert locking, "the commit locks the cells it writes"
    assert not any(re.search(r'\b"?(key_)?embedding"?\b', s) for s in locking), locking


def _chain(ns, key: str, versions: int) -> None:
    for start in range(0, versions, FACTS):
        observation_ingest(namespace=ns, facts=[
            {"key": key, "value": f"value {i}"} for i in range(start, min(start + FACTS, versions))])


def _revoke(ns, key: str):
    return operation_apply(namespace=ns, key=key, op=OpType.REVOKE, actor="user:test",
                           explicit=True)


def test_revoke_on_a_long_chain_issues_the_statements_of_a_short_one(ns):
    _chain(ns, "long", 300)
    _chain(ns, "short", 2)
    long_sql = _statements(_revoke, ns, "long")
    short_sql = _statements(_revoke, ns, "short")
    assert [_shape(s) for s in long_sql] == [_shape(s) for s in short_sql]
    assert cell_value(namespace=ns, key="long").value == "value 298"
    assert cell_value(namespace=ns, key="short").value == "value 0"
    # A second retraction in a row walks past the revoked version in the same one query.
    again = _statements(_revoke, ns, "long")
    assert len(again) == len(long_sql)
    assert cell_value(namespace=ns, key="long").value == "value 297"


def test_point_read_is_one_query_whatever_the_history(ns, settings):
    settings.PMEM_PREPARED_READS = False  # Django's cursor, so the statements can be counted
    _chain(ns, "k", 2)
    with CaptureQueriesContext(connection) as short:
        value = cell_value(namespace=ns, key="k")
    _chain(ns, "k", 90)
    with CaptureQueriesContext(connection) as long:
        later = cell_value(namespace=ns, key="k")
    assert len(short.captured_queries) == len(long.captured_queries) == 1
    assert (value.value, later.value, later.status) == ("value 1", "value 89", "active")


def test_prepared_point_read_answers_like_the_plain_one(ns, settings):
    _chain(ns, "k", 3)
    settings.PMEM_PREPARED_READS = True
    prepared = [cell_value(namespace=ns, key="k") for _ in range(7)]  # past psycopg's threshold
    settings.PMEM_PREPARED_READS = False
    assert set(prepared) == {cell_value(namespace=ns, key="k")}
    settings.PMEM_PREPARED_READS = True
    assert cell_value(namespace=ns, key="missing") is None


def test_point_read_follows_aliases_and_misses_cleanly(ns):
    from memory.models import Cell, KeyAlias

    _chain(ns, "home_city", 1)
    cell = Cell.objects.get(namespace=ns, key="home_city")
    KeyAlias.objects.create(namespace=ns, cell=cell, alias="city_of_residence")
    assert cell_value(namespace=ns, key="City of residence").value == "value 0"
    assert cell_value(namespace=ns, key="nowhere") is None
    detail = cell_detail(namespace=ns, key="home_city")
    assert cell_value(namespace=ns, key="home_city").version == detail.version


def test_frontier_read_statements_do_not_grow_with_history(ns):
    for round_ in range(2):
        observation_ingest(namespace=ns, facts=_facts(FACTS, round_))
    short = _statements(frontier_read, namespace=ns, query="entity 3 attr", k=12)
    for round_ in range(2, 20):
        observation_ingest(namespace=ns, facts=_facts(FACTS, round_))
    long = _statements(frontier_read, namespace=ns, query="entity 3 attr", k=12)
    assert [_shape(s) for s in long] == [_shape(s) for s in short]


def test_frontier_read_is_served_by_the_hnsw_index_and_the_stale_index(ns):
    observation_ingest(namespace=ns, facts=_facts(FACTS, 0))
    sqls = _statements(frontier_read, namespace=ns, query="entity 3 attr", k=12)
    search = next(s for s in sqls if "<=>" in s)
    with transaction.atomic(), connection.cursor() as cur:
        # A 30-cell namespace is cheaper to read whole and sort (exact, and the planner rightly
        # picks that for small namespaces); forbid sorts and sequential scans to ask whether
        # the indexes CAN serve the query: the HNSW index its ORDER BY distance (an operator
        # or expression it does not match would leave a plain scan and a Sort), the partial
        # index the cells whose head moved since the last flush.
        cur.execute("SET LOCAL enable_sort = off")
        cur.execute("SET LOCAL enable_seqscan = off")
        cur.execute("SET LOCAL hnsw.iterative_scan = 'relaxed_order'")
        cur.execute("EXPLAIN " + search)
        plan = "\n".join(r[0] for r in cur.fetchall())
    assert "Index Scan using frontier_embedding_hnsw" in plan, plan
    assert "cell_vector_stale_idx" in plan, plan


def test_a_small_namespace_is_not_read_by_scanning_every_namespaces_copies(make_namespace):
    # The frontier copies of all namespaces share one table. A namespace holding few of them
    # must be read through the namespace index (its own copies, sorted), never by a
    # sequential scan of everyone's: that was 80 ms at 100k copies. (The HNSW index is
    # dropped inside this test's transaction so that 20k copies load at once; rolled back.)
    big, small = make_namespace("big"), make_namespace("small")
    observation_ingest(namespace=small, facts=_facts(FACTS, 0))
    frontier_flush(namespace_id=small.pk)
    vector = "[" + ",".join(["0.05"] * 384) + "]"
    with connection.cursor() as cur:
        cur.execute("DROP INDEX frontier_embedding_hnsw")
        cur.execute("INSERT INTO memory_frontiervector (cell_id, namespace_id, embedding)"
                    " SELECT -g, %s, %s::vector FROM generate_series(1, 20000) AS g",
                    [big.pk, vector])
        cur.execute("ANALYZE memory_frontiervector")
    sqls = _statements(frontier_read, namespace=small, query="entity 3 attr", k=12)
    search = next(s for s in sqls if "<=>" in s)
    with connection.cursor() as cur:
        cur.execute("EXPLAIN " + search)
        plan = "\n".join(r[0] for r in cur.fetchall())
    assert "Seq Scan on memory_frontiervector" not in plan, plan
    assert "frontier_namespace_idx" in plan, plan


def test_no_hnsw_index_on_cells_and_one_on_the_frontier_copy():
    # Every non-HOT update of a row inserts into each HNSW index of its table: a head move
    # rewrites the cell row, so the cell table must carry none.
    with connection.cursor() as cur:
        cur.execute("SELECT tablename, indexname FROM pg_indexes WHERE tablename IN"
                    " ('memory_cell', 'memory_frontiervector') AND indexdef ILIKE '%%USING hnsw%%'")
        assert cur.fetchall() == [("memory_frontiervector", "frontier_embedding_hnsw")]


def test_a_commit_never_inserts_into_the_frontier_index(ns):
    # Head moves delete the frontier copies (a heap delete) instead of writing new ones: the
    # only INSERT into memory_frontiervector is the flush's.
    observation_ingest(namespace=ns, facts=_facts(FACTS, 0))
    frontier_flush(namespace_id=ns.pk)
    sqls = _statements(observation_ingest, namespace=ns, facts=_facts(FACTS, 1))
    assert not [s for s in sqls if "INSERT INTO memory_frontiervector" in s]
    assert Cell.objects.filter(namespace=ns, vector_stale=True).count() == FACTS
    assert not FrontierVector.objects.filter(cell__namespace=ns).exists()


@pytest.mark.django_db(transaction=True)
def test_group_commit_shares_one_transaction_among_observations(ns):
    # Without a model the drain commits consecutive observations in one transaction: eight
    # observations recorded together cost two COMMITs (record, commit), not sixteen; one
    # observation in-process is recorded and committed in one.
    single = _statements(observation_ingest, namespace=ns, facts=_facts(FACTS, 0))
    grouped = _statements(observations_ingest, namespace=ns,
                          observations=[{"facts": _facts(FACTS, r)} for r in range(1, 9)])
    assert sum(1 for s in single if s == "COMMIT") == 1
    assert sum(1 for s in grouped if s == "COMMIT") == 2
    assert len(grouped) < 8 * len(single) * 0.75


def test_a_group_costs_the_statements_of_one_observation_whatever_its_size(ns, settings):
    # A group is ONE batch: its cells locked once, each observation planned on the overlay,
    # one statement per table. Fifteen observations (new keys and rewrites) cost no more
    # statements than two. (A group that fills PMEM_COMMIT_GROUP, 16, costs one statement more:
    # the drain looks once more for work behind it, where a short group ends its look.)
    def group(first: int, n: int) -> list[str]:
        return _statements(observations_ingest, namespace=ns, observations=[
            {"facts": _facts(FACTS, r)} for r in range(first, first + n)])

    observation_ingest(namespace=ns, facts=_facts(FACTS, 0))  # the cells exist: rewrites
    settings.PMEM_COMMIT_GROUP = 16
    two, fifteen = group(100, 2), group(200, 15)
    assert len(fifteen) == len(two), (len(two), len(fifteen))


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("prepared", [True, False])
def test_the_commits_bulk_statements_are_prepared_unless_turned_off(ns, settings, prepared):
    # Behind a transaction-pooling PgBouncer (PMEM_PREPARED_READS=0) nothing may be prepared.
    settings.PMEM_PREPARED_READS = prepared
    connection.close()  # a fresh session: its prepared statements are only this test's
    for r in range(8):
        observation_ingest(namespace=ns, facts=_facts(FACTS, r))
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_prepared_statements"
                    " WHERE statement LIKE 'INSERT INTO memory_operation%%'")
        assert cur.fetchone()[0] == (1 if prepared else 0)


# --- bounded memory per request: what each read loads of memory_evidence --------

#: What no list, graph or page loads of an observation unless it shows it: the client's facts
#: (up to a megabyte of JSON), the extraction and the embedding. The text is the observation
#: itself: whole only where one observation or a read's context is shown, else truncated in
#: SQL under another name.
HEAVY = frozenset({"facts", "extracted", "embedding"})


@dataclass(frozen=True)
class EvidenceRead:
    sql: str
    columns: frozenset[str]  # the memory_evidence columns it returned as they are stored
    rows: int


def _evidence_attributes() -> dict[tuple[int, int], str]:
    with connection.cursor() as cur:
        cur.execute("SELECT attrelid::int, attnum, attname FROM pg_attribute"
                    " WHERE attrelid = 'memory_evidence'::regclass AND attnum > 0")
        return {(oid, num): name for oid, num, name in cur.fetchall()}


@contextlib.contextmanager
def _evidence_reads() -> Iterator[list[EvidenceRead]]:
    """Each statement that returned columns of memory_evidence, with those columns and its
    row count. The source of each result column comes from PostgreSQL itself (the result's
    table OID and column number), so no alias, join or ``values_list`` name can hide one; an
    expression over a column (``left(text, n)``) has no source column and does not count."""
    attributes = _evidence_attributes()
    reads: list[EvidenceRead] = []

    def wrapper(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        result = execute(sql, params, many, context)
        res = getattr(context["cursor"].cursor, "pgresult", None)
        if res is not None and res.nfields:
            columns = frozenset(filter(None, (
                attributes.get((res.ftable(i), res.ftablecol(i))) for i in range(res.nfields))))
            if columns:
                reads.append(EvidenceRead(sql, columns, res.ntuples))
        return result

    with connection.execute_wrapper(wrapper):
        yield reads


def _blob(ns, key: str, observations: int, facts: int) -> None:
    for o in range(observations):
        observation_ingest(namespace=ns, facts=[
            {"key": key, "value": f"value {o}.{i} " + "x" * 64} for i in range(facts)])


def _graph(ns, key: str) -> dict[str, Any]:
    """The widest window of a key's graph: every version of these short keys."""
    return graph_window(cell_lookup(namespace=ns, key=key), limit=WINDOW_MAX)


def test_the_graph_reads_each_observation_once_without_its_heavy_columns(ns):
    # One observation of 500 facts on one key loaded the whole evidence row (facts JSON,
    # extraction, embedding) once per operation and once per support edge: 3.4 GB for one GET.
    # Now one statement reads each observation once, whatever the operations and edges.
    _blob(ns, "small", 1, 2)
    _blob(ns, "large", 2, 60)
    with _evidence_reads() as small:
        _graph(ns, "small")
    with _evidence_reads() as large:
        graph = _graph(ns, "large")
    assert sum(1 for n in graph["nodes"] if n["kind"] == "operation") == 120
    assert [r.rows for r in small] == [1]
    assert [r.rows for r in large] == [2]  # two observations, not 120 operations + 120 edges
    for read in small + large:
        assert not read.columns & (HEAVY | {"text"}), read.columns


def test_the_raw_read_of_text_observations_loads_no_facts_extraction_or_embedding(ns):
    for i in range(12):
        observation_ingest(namespace=ns, text=f"Note {i}: the blob weighs {i} kilograms.")
    with _evidence_reads() as reads:
        result = raw_read(namespace=ns, query="blob weight", k=10)
    assert len(result.items) == 10
    assert reads and all(not r.columns & HEAVY for r in reads), [r.columns for r in reads]


@dataclass
class Probe:
    ns: Any
    observation: int  # the facts + long text observation
    browser: Any  # a logged-in explorer client
    api: Any  # an API client with the namespace's token


@pytest.fixture
def probe(ns, django_user_model) -> Probe:
    from rest_framework.test import APIClient

    from memory.services import observation_fail, observation_record, token_create

    big = observation_ingest(namespace=ns, text="A long note about the blob. " * 300, facts=[
        {"key": "blob", "value": f"value {i} " + "y" * 500} for i in range(20)])
    observation_ingest(namespace=ns, facts=[{"key": "only_facts", "value": "z" * 900}])
    for text in ("Earlier observation: mug 1 was in table 1.",
                 "Update: mug 1 has been moved from table 1 to shelf 2.",
                 "The move of mug 1 to shelf 2 was reported in error."):
        observation_ingest(namespace=ns, text=text)
    failed = observation_record(namespace=ns, text="", facts=[{"key": "f", "value": "w" * 900}],
                                source="probe", actor="api").evidence
    observation_fail(evidence_id=failed.pk, error="a model said no")
    observation_record(namespace=ns, text="Still pending " * 100, source="probe", actor="api")
    user = django_user_model.objects.create_superuser("probe", "probe@example.org", "pw")
    browser = Client()
    browser.force_login(user)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token_create(namespace=ns).key}")
    return Probe(ns, big.pk, browser, api)


def _get(client: Any, path: str) -> Callable[[Probe], Any]:
    def read(p: Probe) -> Any:
        response = client(p).get(path.format(ns=p.ns.name, obs=p.observation))
        assert response.status_code in (200, 204), (path, response.status_code)
        return response
    return read


def _api_read(mode: str) -> Callable[[Probe], Any]:
    def read(p: Probe) -> Any:
        response = p.api.post(f"/api/v1/namespaces/{p.ns.name}/read/",
                              {"query": "blob value", "mode": mode}, format="json")
        assert response.status_code == 200, response.content
        return response
    return read


def _browser(p: Probe) -> Any:
    return p.browser


def _api(p: Probe) -> Any:
    return p.api


SHOWN = frozenset({"text", "facts"})  # one whole observation, or a raw read's context
READS: list[tuple[str, Callable[[Probe], Any], frozenset[str]]] = [
    ("cell_detail", lambda p: cell_detail(namespace=p.ns, key="blob"), frozenset()),
    ("graph_window", lambda p: _graph(p.ns, "blob"), frozenset()),
    ("graph_window of a retraction", lambda p: _graph(p.ns, "mug_1_location"),
     frozenset()),
    ("frontier_read, every disclosure", lambda p: frontier_read(
        namespace=p.ns, query="blob", k=12, disclose=["support", "alternatives", "history"]),
     frozenset()),
    ("raw_read", lambda p: raw_read(namespace=p.ns, query="blob value", k=10), SHOWN),
    ("raw_read ordered", lambda p: raw_read(namespace=p.ns, query="blob", k=10, ordered=True),
     SHOWN),
    ("explorer frontier", _get(_browser, "/ns/{ns}/"), frozenset()),
    ("explorer failed observations", _get(_browser, "/ns/{ns}/?show=failed"), frozenset()),
    ("explorer cell page", _get(_browser, "/ns/{ns}/cells/blob/"), frozenset()),
    ("explorer cell panel", _get(_browser, "/ns/{ns}/cells/blob/panel/"), frozenset()),
    ("explorer cell state", _get(_browser, "/ns/{ns}/cells/blob/panel/?part=state"),
     frozenset()),
    ("explorer graph", _get(_browser, "/ns/{ns}/cells/blob/graph/"), frozenset()),
    ("explorer operation log", _get(_browser, "/ns/{ns}/operations/"), frozenset()),
    ("explorer observation list", _get(_browser, "/ns/{ns}/observations/list/"), frozenset()),
    ("explorer live poll", _get(_browser, "/ns/{ns}/live/"), frozenset()),
    ("explorer read compare", _get(_browser, "/ns/{ns}/read/?q=blob+value"), SHOWN),
    ("explorer observation page", _get(_browser, "/ns/{ns}/observations/{obs}/"), SHOWN),
    ("API cells", _get(_api, "/api/v1/namespaces/{ns}/cells/"), frozenset()),
    ("API cell", _get(_api, "/api/v1/namespaces/{ns}/cells/blob/"), frozenset()),
    ("API graph", _get(_api, "/api/v1/namespaces/{ns}/cells/blob/graph/"), frozenset()),
    ("API operation log", _get(_api, "/api/v1/namespaces/{ns}/operations/"), frozenset()),
    ("API observation", _get(_api, "/api/v1/namespaces/{ns}/observations/{obs}/"), SHOWN),
    ("API frontier read", _api_read("frontier"), frozenset()),
    ("API raw read", _api_read("raw"), SHOWN),
]


@pytest.mark.parametrize("read,shown", [(r, s) for _, r, s in READS], ids=[n for n, _, _ in READS])
def test_no_read_loads_observation_columns_it_does_not_show(probe, read, shown):
    with _evidence_reads() as reads:
        read(probe)
    for r in reads:
        loaded = r.columns & (HEAVY | {"text"})
        assert loaded <= shown, (sorted(loaded - shown), r.sql[:400])
