"""The frontier index: an HNSW index over each headed cell's ``key: value`` embedding.

A commit never inserts into it. A head move marks the cell ``vector_stale`` and deletes its
copy in ``memory_frontiervector`` (a heap delete: the HNSW entry dies with the row). Reads
search the index and scan the stale cells exactly (:func:`memory.selectors.frontier_read`),
so they are exact at once; :func:`frontier_flush` re-indexes the stale cells in bulk — once
per cell however often it moved since — when a namespace holds ``PMEM_FRONTIER_FLUSH_AT``
of them (checked by the drain after each commit group) and on the worker's periodic sweep.
Why: each HNSW insert walks the graph (~0.5 ms at 384 dimensions), and when the index sat on
the cell row every head move paid one, the dearest step of a commit (issue 7).
"""

from __future__ import annotations

from django.conf import settings
from django.db import connection, transaction

_FLUSH_SQL = """
WITH stale AS (
    SELECT id FROM memory_cell WHERE namespace_id = %s AND vector_stale
     ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED
), cleared AS (
    UPDATE memory_cell AS c SET vector_stale = false FROM stale WHERE c.id = stale.id
    RETURNING c.id, c.namespace_id, c.embedding, c.head_id
), indexed AS (
    INSERT INTO memory_frontiervector (cell_id, namespace_id, embedding)
    SELECT id, namespace_id, embedding FROM cleared
     WHERE embedding IS NOT NULL AND head_id IS NOT NULL
    ON CONFLICT (cell_id) DO UPDATE SET embedding = EXCLUDED.embedding
    RETURNING 1
)
SELECT (SELECT count(*) FROM cleared), (SELECT count(*) FROM indexed)
"""

FLUSH_CHUNK = 2000


def stale_count(*, namespace_id: int) -> int:
    """Cells of the namespace the frontier index does not hold yet (a partial-index scan)."""
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM memory_cell WHERE namespace_id = %s AND vector_stale",
                    [namespace_id])
        return int(cur.fetchone()[0])


def frontier_flush(*, namespace_id: int) -> int:
    """Index every stale cell of the namespace, in chunks of one short transaction each.
    Cells a commit holds locked right now are skipped (they stay stale, and exact for
    reads). Returns how many cells were cleared."""
    total = 0
    while True:
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute(_FLUSH_SQL, [namespace_id, FLUSH_CHUNK])
            cleared, _ = cur.fetchone()
        total += cleared
        if cleared < FLUSH_CHUNK:
            return total


def frontier_flush_if_due(*, namespace_id: int) -> int:
    """Flush when the namespace holds ``PMEM_FRONTIER_FLUSH_AT`` stale cells or more, which
    bounds the exact part of every frontier read. Returns how many cells were cleared."""
    if stale_count(namespace_id=namespace_id) < int(settings.PMEM_FRONTIER_FLUSH_AT):
        return 0
    return frontier_flush(namespace_id=namespace_id)


def frontier_flush_all() -> int:
    """Flush every namespace that has stale cells (the worker's periodic sweep)."""
    with connection.cursor() as cur:
        cur.execute("SELECT DISTINCT namespace_id FROM memory_cell WHERE vector_stale")
        namespaces = [row[0] for row in cur.fetchall()]
    return sum(frontier_flush(namespace_id=ns) for ns in namespaces)
