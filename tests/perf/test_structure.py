"""What keeps the write and read paths fast, asserted structurally (decisions 14-19).

``manage.py pmem_bench perf`` measures the times; these tests pin down why they hold: the
statements a commit issues do not grow with the observation's history or the namespace's, a
revoke does not walk the chain it retracts from, the reads do not grow with history, and the
frontier read's shape is one the HNSW index can serve. No wall-clock assertions: the machine
is shared.
"""

from __future__ import annotations

import re

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from memory.domain import OpType
from memory.models import Cell, FrontierVector
from memory.selectors import cell_detail, cell_value, frontier_read
from memory.services import observation_ingest, observations_ingest, operation_apply
from memory.services.frontier import frontier_flush

pytestmark = pytest.mark.django_db

FACTS = 30
#: Statements one observation of 30 facts may cost, end to end (record, extract, plan,
#: commit, embedding refresh; BEGIN/COMMIT included). It was 35 when this was first written,
#: 25 since the drain extracts inside its commit without a model (decision 14).
MAX_STATEMENTS_PER_OBSERVATION = 28


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
    # rewrites the cell row, so the cell table must carry none (decision 15).
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
    # observations recorded together cost two COMMITs (record, commit), not sixteen.
    single = _statements(observation_ingest, namespace=ns, facts=_facts(FACTS, 0))
    grouped = _statements(observations_ingest, namespace=ns,
                          observations=[{"facts": _facts(FACTS, r)} for r in range(1, 9)])
    assert sum(1 for s in single if s == "COMMIT") == 2
    assert sum(1 for s in grouped if s == "COMMIT") == 2
    assert len(grouped) < 8 * len(single) * 0.75


def test_a_group_costs_the_statements_of_one_observation_whatever_its_size(ns):
    # A group is ONE batch: its cells locked once, each observation planned on the overlay,
    # one statement per table. Sixteen observations (new keys and rewrites) cost no more
    # statements than two.
    def group(first: int, n: int) -> list[str]:
        return _statements(observations_ingest, namespace=ns, observations=[
            {"facts": _facts(FACTS, r)} for r in range(first, first + n)])

    observation_ingest(namespace=ns, facts=_facts(FACTS, 0))  # the cells exist: rewrites
    two, sixteen = group(100, 2), group(200, 16)
    assert len(sixteen) == len(two), (len(two), len(sixteen))


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
