"""The frontier's background indexer inside a real Celery worker: the drain hands
the HNSW re-indexing to a thread of the worker process, which flushes beside the commits."""

from __future__ import annotations

import pytest
from django.db import connection

from memory.selectors.search import frontier_read
from memory.services.frontier import stale_count
from tests.support.worker import wait_until
from tests.tasks.helpers import assert_memory_consistent, settle, submit

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_a_worker_indexes_the_frontier_beside_its_commits(celery_worker_proc, ns):
    worker = celery_worker_proc(PMEM_FRONTIER_FLUSH_ASYNC="1", PMEM_FRONTIER_FLUSH_AT="20")
    texts = ["\n".join(f"shelf_{o}_{j}_item = book {o} {j}" for j in range(20)) for o in range(3)]
    evidence = submit(ns, *texts)
    assert settle(evidence, worker) == ["committed"] * 3
    # every commit group left >= 20 stale cells: the worker's indexer takes them all
    wait_until(lambda: stale_count(namespace_id=ns.pk) == 0, timeout=30,
               message="the background indexer to flush the namespace")
    # The worker's thread did it, not a drain. Its line is logged after its commit, which
    # the count above may see first.
    wait_until(lambda: "background flush:" in worker.log_text(), timeout=10,
               message="the worker's indexer thread to log its flush")
    with connection.cursor() as cur:
        cur.execute("SELECT count(*), count(*) FILTER (WHERE f.embedding = c.embedding)"
                    " FROM memory_cell c JOIN memory_frontiervector f ON f.cell_id = c.id"
                    " WHERE c.namespace_id = %s", [ns.pk])
        assert cur.fetchone() == (60, 60)
    top = frontier_read(namespace=ns, query="shelf 2 7 item book", k=1).items
    assert [(i["key"], i["value"]) for i in top] == [("shelf_2_7_item", "book 2 7")]
    assert_memory_consistent(ns)
