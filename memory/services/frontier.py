"""The frontier index: an HNSW index over each headed cell's ``key: value`` embedding.

A commit never inserts into it. A head move marks the cell ``vector_stale`` and deletes its
copy in ``memory_frontiervector`` (a heap delete: the HNSW entry dies with the row). Reads
search the index and scan the stale cells exactly (:func:`memory.selectors.search.frontier_read`),
so they are exact at once; :func:`frontier_flush` re-indexes the stale cells in bulk — once
per cell however often it moved since — when a namespace holds ``PMEM_FRONTIER_FLUSH_AT``
of them (checked by the drain after each commit group) and on the worker's periodic sweep.
Why: each HNSW insert walks the graph (~0.5 ms at 384 dimensions), and when the index sat on
the cell row every head move paid one, the dearest step of a commit.

The invariant reads rely on: a cell that is not ``vector_stale`` has exactly one copy, equal
to its embedding; a stale cell has none. A flush never holds a cell's row lock while it
inserts into the index: it copies the stale cells' embeddings (the slow part, no cell lock),
then, in the same transaction, clears the flag of each cell it can lock at once
(``SKIP LOCKED``: a commit holding the cell is never waited for) whose embedding still equals
its copy, and deletes the other copies. So it can run beside the commits of its namespace —
by default on a background thread of the process that commits (``_indexer``, a
:class:`memory.background.KeyedQueue`), which
puts the second core to work while the first commits.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import connection, transaction

from memory.background import KeyedQueue

from .binding import bound_cursor
from .embeddings import embed_after_commit, embed_pending_all

log = logging.getLogger("pmem.frontier")

_FLUSH_LOCK_CLASS = 0x5046  # "PF": one flusher per namespace at a time (transaction lock)

_PICK_SQL = """
SELECT id FROM memory_cell WHERE namespace_id = %b AND vector_stale ORDER BY id LIMIT %b
"""

# The HNSW inserts: no cell row is locked meanwhile.
_COPY_SQL = """
INSERT INTO memory_frontiervector (cell_id, namespace_id, embedding)
SELECT id, namespace_id, embedding FROM memory_cell
 WHERE id = ANY(%b::bigint[]) AND vector_stale AND head_id IS NOT NULL AND embedding IS NOT NULL
    ON CONFLICT (cell_id) DO UPDATE SET embedding = EXCLUDED.embedding
"""

# Clear what the copies still match (a cell whose head moved since, or that a commit holds
# right now, keeps its flag), then drop every copy whose cell stayed stale.
_SETTLE_SQL = """
WITH settled AS (
    SELECT c.id FROM memory_cell c
      LEFT JOIN memory_frontiervector f ON f.cell_id = c.id
     WHERE c.id = ANY(%(ids)b::bigint[]) AND c.vector_stale
       AND (c.head_id IS NULL OR c.embedding IS NULL OR f.embedding = c.embedding)
       FOR UPDATE OF c SKIP LOCKED
), cleared AS (
    UPDATE memory_cell AS c SET vector_stale = false FROM settled WHERE c.id = settled.id
    RETURNING c.id
), dropped AS (
    DELETE FROM memory_frontiervector AS f
     WHERE f.cell_id = ANY(%(ids)b::bigint[]) AND f.cell_id NOT IN (SELECT id FROM cleared)
    RETURNING 1
)
SELECT (SELECT count(*) FROM cleared), (SELECT count(*) FROM dropped)
"""

FLUSH_CHUNK = 500


#: Cells of a namespace the frontier index does not hold yet (a partial-index scan).
STALE_COUNT_SQL = "SELECT count(*) FROM memory_cell WHERE namespace_id = %s AND vector_stale"


def stale_count(*, namespace_id: int) -> int:
    """Cells of the namespace the frontier index does not hold yet."""
    with connection.cursor() as cur:
        cur.execute(STALE_COUNT_SQL, [namespace_id])
        return int(cur.fetchone()[0])


def frontier_flush(*, namespace_id: int, wait: bool = True) -> int:
    """Index every stale cell of the namespace, in chunks of one transaction each, and
    return how many cells were cleared. Cells a commit holds, or moves meanwhile, stay stale
    (and exact for reads) for the next flush. One flusher works on a namespace at a time:
    with ``wait`` a second one waits for the first's chunk, else it returns at once."""
    total = 0
    while True:
        with transaction.atomic(), bound_cursor() as cur:
            lock = "pg_advisory_xact_lock" if wait else "pg_try_advisory_xact_lock"
            cur.execute(f"SELECT {lock}(%b::int, %b::int)", [_FLUSH_LOCK_CLASS, namespace_id])
            if not wait and not cur.fetchone()[0]:
                return total  # another flusher holds the namespace
            cur.execute(_PICK_SQL, [namespace_id, FLUSH_CHUNK])
            ids = [row[0] for row in cur.fetchall()]
            if not ids:
                return total
            cur.execute(_COPY_SQL, [ids])
            cur.execute(_SETTLE_SQL, {"ids": ids})
            cleared, _ = cur.fetchone()
        total += cleared
        if len(ids) < FLUSH_CHUNK or cleared == 0:
            return total  # the rest is held by commits right now: the next flush takes it


def _flush_in_background(namespace_id: int) -> None:
    cleared = frontier_flush(namespace_id=namespace_id, wait=False)
    if cleared:
        log.info("background flush: %d cells of namespace %s indexed", cleared, namespace_id)


#: The background indexer (memory.background): the committing thread only asks (a set
#: insert); the HNSW inserts run in another server process meanwhile. If the process dies,
#: the cells simply stay stale until the next flush (reads stay exact).
_indexer: KeyedQueue[int] = KeyedQueue("pmem-frontier-indexer", _flush_in_background)


def frontier_flush_if_due(*, namespace_id: int, stale: int | None = None) -> int:
    """The drain's step after each commit. Under a deferred embedder, first the embeddings
    the commit left pending (memory.services.embeddings.embed_after_commit). Then a flush
    once the namespace holds ``PMEM_FRONTIER_FLUSH_AT`` stale cells, which bounds the exact
    part of every frontier read. With ``PMEM_FRONTIER_FLUSH_ASYNC`` (the default) the
    background indexer does it while commits go on; if it falls behind by three more
    thresholds, the caller flushes itself (back-pressure). Returns how many cells the caller
    cleared. ``stale``: the caller counted the stale cells just now (:data:`STALE_COUNT_SQL`,
    in a round trip it made anyway)."""
    embed_after_commit(namespace_id=namespace_id)
    at = int(settings.PMEM_FRONTIER_FLUSH_AT)
    if stale is None:
        stale = stale_count(namespace_id=namespace_id)
    if stale < at:
        return 0
    if settings.PMEM_FRONTIER_FLUSH_ASYNC and stale < 4 * at:
        _indexer.request(namespace_id)
        return 0
    return frontier_flush(namespace_id=namespace_id)


def frontier_flush_wait(timeout: float | None = None) -> bool:
    """Wait for this process's background indexer to be idle (benchmarks, imports, tests)."""
    return _indexer.wait(timeout)


def frontier_flush_all() -> int:
    """Flush every namespace that has stale cells (the worker's periodic sweep), after
    embedding what a deferred embedder left pending (its cells then index in this flush)."""
    embed_pending_all()
    with connection.cursor() as cur:
        cur.execute("SELECT DISTINCT namespace_id FROM memory_cell WHERE vector_stale")
        namespaces = [row[0] for row in cur.fetchall()]
    return sum(frontier_flush(namespace_id=ns, wait=False) for ns in namespaces)
