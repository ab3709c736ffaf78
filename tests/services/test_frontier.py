"""The frontier index kept off the commit path: commits mark moved cells stale and
drop their indexed copies, reads merge the HNSW search with an exact scan of the stale cells,
and a flush re-indexes them. Reads must be exact at every moment in between."""

from __future__ import annotations

import contextlib
import time

import pytest
from django.test import override_settings

from memory.domain import OpType
from memory.models import Cell, FrontierVector
from memory.selectors.search import frontier_read
from memory.services import observation_ingest, observations_ingest, operation_apply
from memory.services.frontier import frontier_flush, frontier_flush_all, stale_count

pytestmark = pytest.mark.django_db


def _top(ns, query, k=3):
    return [(i["key"], i["value"]) for i in frontier_read(namespace=ns, query=query, k=k).items]


def test_a_moved_head_is_read_at_once_then_indexed_by_the_flush(ns):
    observation_ingest(namespace=ns, facts=[{"key": "mug_location", "value": "table"},
                                            {"key": "lamp_color", "value": "red"}])
    assert stale_count(namespace_id=ns.pk) == 2
    assert not FrontierVector.objects.filter(namespace=ns).exists()
    assert _top(ns, "mug location table", k=1) == [("mug_location", "table")]

    assert frontier_flush(namespace_id=ns.pk) == 2
    assert stale_count(namespace_id=ns.pk) == 0
    assert FrontierVector.objects.filter(namespace=ns).count() == 2
    assert _top(ns, "mug location table", k=1) == [("mug_location", "table")]

    observation_ingest(namespace=ns, facts=[{"key": "mug_location", "value": "shelf"}])
    # The moved cell left the index and is scanned exactly: the new value, never the old.
    assert set(FrontierVector.objects.filter(namespace=ns).values_list("cell__key", flat=True)
               ) == {"lamp_color"}
    assert _top(ns, "mug location", k=1) == [("mug_location", "shelf")]
    frontier_flush(namespace_id=ns.pk)
    assert _top(ns, "mug location", k=1) == [("mug_location", "shelf")]


def test_each_cell_is_read_once_whether_indexed_or_stale(ns):
    observation_ingest(namespace=ns, facts=[{"key": f"item_{i}_place", "value": f"box {i}"}
                                            for i in range(6)])
    frontier_flush(namespace_id=ns.pk)
    observation_ingest(namespace=ns, facts=[{"key": f"item_{i}_place", "value": f"bag {i}"}
                                            for i in range(3)])
    top = _top(ns, "item place", k=12)
    assert sorted(top) == sorted([(f"item_{i}_place", f"bag {i}") for i in range(3)]
                                 + [(f"item_{i}_place", f"box {i}") for i in range(3, 6)])


def test_a_cell_emptied_by_rollback_leaves_the_frontier(ns):
    observation_ingest(namespace=ns, facts=[{"key": "door_state", "value": "open"}])
    frontier_flush(namespace_id=ns.pk)
    operation_apply(namespace=ns, key="door_state", op=OpType.REVOKE, actor="user:t")
    assert _top(ns, "door state open") == []
    frontier_flush(namespace_id=ns.pk)
    assert not FrontierVector.objects.filter(namespace=ns).exists()
    assert _top(ns, "door state open") == []


def test_the_drain_flushes_once_a_namespace_holds_enough_stale_cells(ns):
    with override_settings(PMEM_FRONTIER_FLUSH_AT=50):
        observations_ingest(namespace=ns, observations=[
            {"facts": [{"key": f"k{o}_{j}", "value": "v"} for j in range(20)]} for o in range(2)])
        assert stale_count(namespace_id=ns.pk) == 40  # below the threshold: left stale
        observation_ingest(namespace=ns, facts=[{"key": f"k9_{j}", "value": "v"}
                                                for j in range(20)])
    assert stale_count(namespace_id=ns.pk) == 0
    assert FrontierVector.objects.filter(namespace=ns).count() == 60


def test_flush_all_covers_every_namespace_and_is_idempotent(make_namespace):
    a, b = make_namespace("fa"), make_namespace("fb")
    observation_ingest(namespace=a, facts=[{"key": "x", "value": "1"}])
    observation_ingest(namespace=b, facts=[{"key": "y", "value": "2"}])
    assert frontier_flush_all() >= 2
    assert frontier_flush_all() == 0
    assert not Cell.objects.filter(namespace__in=[a, b], vector_stale=True).exists()
    assert FrontierVector.objects.filter(namespace__in=[a, b]).count() == 2


@pytest.mark.django_db(transaction=True)
def test_one_bad_observation_in_a_group_fails_alone(ns):
    # The middle observation cannot be committed (its key overflows the key column, which the
    # API would have refused): the one validator refuses it before the commit, so the others
    # commit, in seq order, and the bad one is failed with its error, nothing of it kept.
    from memory.models import Evidence, Operation

    evidence = observations_ingest(namespace=ns, observations=[
        {"facts": [{"key": "a", "value": "1"}]},
        {"facts": [{"key": "b", "value": "2"}, {"key": "x" * 300, "value": "too long"}]},
        {"facts": [{"key": "a", "value": "3"}]},
    ])
    assert [e.state for e in evidence] == ["committed", "failed", "committed"]
    assert "key: at most 200 characters" in evidence[1].error
    assert not Operation.objects.filter(evidence=evidence[1]).exists()
    assert not Cell.objects.filter(namespace=ns, key="b").exists()
    assert _top(ns, "a", k=5) == [("a", "3")]
    assert Evidence.objects.filter(namespace=ns, state="committed").count() == 2


# --- a flush beside the commits (the background indexer) ------------------------------------


def _assert_index_matches_cells(ns):
    """The invariant reads rely on: a cell that is not stale has exactly one copy, equal to
    its embedding; a stale cell has none (so the HNSW part never returns an old value)."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(
            "SELECT count(*) FILTER (WHERE NOT c.vector_stale AND c.head_id IS NOT NULL"
            "                          AND (f.cell_id IS NULL OR f.embedding <> c.embedding)),"
            "       count(*) FILTER (WHERE (c.vector_stale OR c.head_id IS NULL)"
            "                          AND f.cell_id IS NOT NULL)"
            "  FROM memory_cell c LEFT JOIN memory_frontiervector f ON f.cell_id = c.id"
            " WHERE c.namespace_id = %s", [ns.pk])
        wrong_or_missing, copies_of_stale = cur.fetchone()
    assert (wrong_or_missing, copies_of_stale) == (0, 0)


@contextlib.contextmanager
def _paused_transaction(begin, finish=lambda: None):
    """Run ``begin()`` in a transaction on another thread (its own connection) and keep that
    transaction open while the block runs; ``finish()`` runs in it before it commits."""
    import threading

    from django.db import connection, transaction

    started, release, failures = threading.Event(), threading.Event(), []

    def run():
        try:
            with transaction.atomic():
                begin()
                started.set()
                release.wait(30)
                finish()
        except Exception as exc:  # surfaced to the test below
            failures.append(exc)
        finally:
            started.set()
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    try:
        assert started.wait(30) and not failures, failures
        yield
    finally:
        release.set()
        thread.join(30)
    assert not failures, failures


@pytest.mark.django_db(transaction=True)
def test_a_cell_a_commit_holds_is_skipped_by_the_flush_and_keeps_no_copy(ns):
    observation_ingest(namespace=ns, facts=[{"key": f"shelf_{i}", "value": f"book {i}"}
                                            for i in range(4)])

    def move_shelf_0():  # a writer that locked shelf_0 and moved its head, uncommitted
        operation_apply(namespace=ns, key="shelf_0", op=OpType.ACCEPT, value="vase",
                        actor="user:t")

    with _paused_transaction(move_shelf_0):
        assert frontier_flush(namespace_id=ns.pk) == 3  # never waits for the writer
        assert list(Cell.objects.filter(namespace=ns, vector_stale=True)
                    .values_list("key", flat=True)) == ["shelf_0"]
        assert not FrontierVector.objects.filter(cell__key="shelf_0", namespace=ns).exists()
    _assert_index_matches_cells(ns)
    assert _top(ns, "shelf 0 vase", k=1) == [("shelf_0", "vase")]
    frontier_flush(namespace_id=ns.pk)
    _assert_index_matches_cells(ns)
    assert _top(ns, "shelf 0 vase", k=1) == [("shelf_0", "vase")]


@pytest.mark.django_db(transaction=True)
def test_a_flush_racing_the_commits_never_leaves_a_wrong_copy(ns):
    # A flusher loops on its own connection while observations move the same heads again and
    # again: whatever interleaving happens, every copy it leaves matches its cell, and the
    # frontier read returns each key's current value. (A key rewritten faster than a flush
    # can copy it just stays stale, scanned exactly, until a flush finds it still.)
    import threading

    from django.db import connection

    keys = [f"slot_{i}_item" for i in range(60)]
    observation_ingest(namespace=ns, facts=[{"key": k, "value": "start"} for k in keys])
    done = threading.Event()
    flushed = []

    def flusher():
        try:
            while not done.is_set():
                flushed.append(frontier_flush(namespace_id=ns.pk, wait=False))
        finally:
            connection.close()

    thread = threading.Thread(target=flusher)
    thread.start()
    try:  # each round moves a quarter of the keys, so the flusher races some and not others
        for round_ in range(16):
            observation_ingest(namespace=ns, facts=[{"key": k, "value": f"round {round_} {k}"}
                                                    for k in keys[round_ % 4::4]])
    finally:
        done.set()
        thread.join(60)
    assert sum(flushed) > 0  # it did run beside the commits
    _assert_index_matches_cells(ns)
    frontier_flush(namespace_id=ns.pk)
    _assert_index_matches_cells(ns)
    assert stale_count(namespace_id=ns.pk) == 0
    assert _top(ns, "slot 7 item round 15", k=1) == [("slot_7_item", "round 15 slot_7_item")]


@pytest.mark.django_db(transaction=True)
def test_the_background_indexer_flushes_while_the_drain_goes_on(ns):
    from django.db import connection

    from memory.services.frontier import frontier_flush_wait

    def others() -> int:  # client connections to this database besides this thread's
        with connection.cursor() as cur:
            cur.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                        " AND pid <> pg_backend_pid() AND backend_type = 'client backend'")
            return int(cur.fetchone()[0])

    before = others()
    with override_settings(PMEM_FRONTIER_FLUSH_ASYNC=True, PMEM_FRONTIER_FLUSH_AT=50):
        observations_ingest(namespace=ns, observations=[
            {"facts": [{"key": f"k{o}_{j}", "value": "v"} for j in range(20)]} for o in range(3)])
        assert frontier_flush_wait(timeout=60)
    assert stale_count(namespace_id=ns.pk) == 0
    assert FrontierVector.objects.filter(namespace=ns).count() == 60
    _assert_index_matches_cells(ns)
    # the indexer closed its own connection when idle (the server notices within moments)
    deadline = time.monotonic() + 10
    while others() != before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert others() == before


@pytest.mark.django_db(transaction=True)
def test_a_commit_never_waits_for_a_flush_copying_its_cell(ns):
    # A flush midway (copies inserted, the HNSW work done, not yet settled) holds no lock a
    # commit needs: an immediate foreign key from the copy to the cell, or a lock taken while
    # copying, would make the commit's SELECT ... FOR UPDATE wait for the whole copy step.
    from django.db import connection

    from memory.services import frontier
    from memory.services.binding import bound_cursor

    observation_ingest(namespace=ns, facts=[{"key": "lamp_state", "value": "off"}])
    cell_id = Cell.objects.get(namespace=ns, key="lamp_state").pk
    settled = []

    def copy():  # the flush's first step: copies inserted, nothing settled yet
        with bound_cursor() as cur:
            cur.execute(frontier._COPY_SQL, [[cell_id]])

    def settle():
        with bound_cursor() as cur:
            cur.execute(frontier._SETTLE_SQL, {"ids": [cell_id]})
            settled.append(cur.fetchone())

    with _paused_transaction(copy, settle):
        with connection.cursor() as cur:
            cur.execute("SET lock_timeout = '3s'")  # a wait fails the test instead of hanging
        try:
            observation_ingest(namespace=ns, facts=[{"key": "lamp_state", "value": "on"}])
        finally:
            with connection.cursor() as cur:
                cur.execute("RESET lock_timeout")
    assert settled == [(0, 1)]  # the copy it made is of a value that moved on: dropped
    assert _top(ns, "lamp state on", k=1) == [("lamp_state", "on")]
    _assert_index_matches_cells(ns)


def test_the_support_disclosure_shows_the_newest_three_texts_of_each_head(ns):
    # Read in SQL, three per head and cut: a head supported a thousand times
    # must not load a thousand texts. Facts-only support (no text) is skipped, not counted.
    for i in range(5):
        observation_ingest(namespace=ns, text=f"Report {i} says " + "the blob is heavy. " * 20,
                           facts=[{"key": "blob_weight", "value": "heavy"}])
    observation_ingest(namespace=ns, facts=[{"key": "blob_weight", "value": "heavy"}])
    observation_ingest(namespace=ns, text="One report on the lamp.",
                       facts=[{"key": "lamp_color", "value": "red"}])
    items = {i["key"]: i["line"] for i in frontier_read(
        namespace=ns, query="blob weight", k=2, disclose=["support"]).items}
    assert items["blob_weight"] == (
        "blob_weight = heavy; support: 6 [Report 4 says the blob is heavy. the blob is heavy. "
        "the blo…; Report 3 says the blob is heavy. the blob is heavy. the blo…; Report 2 "
        "says the blob is heavy. the blob is heavy. the blo…]")
    assert items["lamp_color"] == "lamp_color = red; support: 1 [One report on the lamp.]"
