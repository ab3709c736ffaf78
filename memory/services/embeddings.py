"""Embeddings computed after a commit, outside it (SPEC §7), and which embedder a namespace's
vectors belong to.

A commit writes a moved cell's ``key: value`` embedding itself when the vectors computed
before it hold the new text (a cheap embedder's always do). What they missed — a rollback
reinstating an older value, a key merged into another key's name, every head move under a
*deferred* embedder (the local semantic one, milliseconds a text) — is marked ``embed_pending``
and embedded here, after the transaction: no model or embedding call ever sits inside one.

Under a deferred embedder the committing process does it on a background thread
(``_embedder``, a :class:`memory.background.KeyedQueue`), in batches, once per cell however
often its head moved meanwhile, and the worker's periodic sweep catches up whatever a dead process left (:func:`embed_pending_all`).
Until then a moved cell ranks by its previous embedding (same key) and a new one by its words
alone; the value a read shows is always the head's.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence

from django.conf import settings
from django.db import connection
from django.db.models import BooleanField, ExpressionWrapper, Q

from memory.background import KeyedQueue
from memory.domain.render import embedding_text, evidence_text, key_text
from memory.llm.embedding import EmbeddingError, embed_batch, embedder_from_settings, embedder_id
from memory.llm.vectors import unpack_vector
from memory.models import Cell, Evidence, Namespace

from .batch import Applied
from .binding import vector_literal

log = logging.getLogger("pmem.embeddings")

#: Texts embedded per statement by the background pass (bounded memory, short transactions).
EMBED_CHUNK = 64
_EMBED_LOCK_CLASS = 0x5045  # "PE": one embedder per namespace at a time (session lock)
#: The background thread's niceness (Linux schedules threads apart): commits and reads, at the
#: process's own priority, go first on a small host's cores.
BACKGROUND_NICE = 10
#: The background thread starts once requests have paused this long (at most MAX_DELAY after
#: the first): a burst of commits is embedded after it, each cell once at its last value, and
#: its commits do not share the cores with the embedder meanwhile.
QUIET = 0.3
MAX_DELAY = 5.0


class EmbedderMismatch(Exception):
    """The namespace's vectors came from another embedder than this process's: comparing
    them would rank by noise. ``manage.py pmem_reembed NAMESPACE`` re-embeds it."""

    def __init__(self, namespace: Namespace, want: str) -> None:
        self.namespace, self.have, self.want = namespace.name, namespace.embedder, want
        made = f"by {self.have}" if self.have else "by an embedder it has no record of"
        busy = " (a re-embedding is under way)" if namespace.reembed else ""
        super().__init__(
            f"namespace {namespace.name!r} holds vectors made {made}, and this server embeds "
            f"with {want}{busy}: run `manage.py pmem_reembed {namespace.name}` (or set "
            "PMEM_EMBEDDER back) before reading it by similarity")


def namespace_embedder_check(namespace: Namespace) -> None:
    """Refuse (:class:`EmbedderMismatch`) a similarity read of a namespace whose vectors came
    from another embedder. A namespace that holds no vector yet is claimed."""
    want = embedder_id()
    if namespace.embedder == want:
        return
    if not namespace.reembed and not _holds_vectors(namespace.pk):
        Namespace.objects.filter(pk=namespace.pk, embedder=namespace.embedder).update(
            embedder=want)
        namespace.embedder = want
        return
    raise EmbedderMismatch(namespace, want)


def _holds_vectors(namespace_id: int) -> bool:
    return (Cell.objects.filter(namespace_id=namespace_id, embedding__isnull=False).exists()
            or Evidence.objects.filter(namespace_id=namespace_id,
                                       embedding__isnull=False).exists())


# --- after a commit ---------------------------------------------------------------------------


def refresh_after_commit(applied: Sequence[Applied], vectors: dict[str, str] | None = None) -> int:
    """Refresh the ``key: value`` embeddings of cells whose head moved and whose new vector
    the commit did not write: now, or — a deferred embedder with ``PMEM_EMBED_ASYNC`` — on the
    background thread. Never raises for an embedder fault: the cells stay ``embed_pending``
    for the sweep. Returns the embedding calls it made."""
    cells = [a.cell for a in applied
             if a.cell is not None and a.decision is not None and not a.embedded]
    if not cells:
        return 0
    if getattr(embedder_from_settings(), "deferred", False):
        embed_after_commit(namespace_id=cells[0].namespace_id)
        return 0
    try:
        return cells_refresh_embeddings(cell_ids={c.pk for c in cells}, cached=vectors)[1]
    except EmbeddingError as exc:
        log.warning("cell embeddings left stale (embedder failed): %s", exc)
        return 0


def cells_refresh_embeddings(*, cell_ids: Collection[int],
                             cached: dict[str, str] | None = None) -> tuple[int, int]:
    """Embed every listed cell whose embedded text no longer matches ``key: head value`` (or
    that lacks its key's embedding), taking vectors from ``cached`` (text -> packed vector)
    where it has them and embedding the rest in one batch; clear ``embed_pending`` of the
    others. Returns (cells refreshed, embedding calls made).

    A concurrent head move between reading and writing is caught by the conditional UPDATE
    (the head and the embedded text must still be what was read); it is embedded on its own."""
    cached = cached or {}
    stale, current = [], []
    cells = (Cell.objects.filter(pk__in=list(cell_ids)).select_related("head")
             .only("key", "embedded_text", "embed_pending", "head__value")
             .annotate(kemb_missing=ExpressionWrapper(Q(key_embedding__isnull=True),
                                                      output_field=BooleanField())))
    for cell in cells:
        text = embedding_text(cell.key, cell.head.value) if cell.head else ""
        if text != cell.embedded_text or cell.kemb_missing:
            stale.append((cell, text))
        elif cell.embed_pending:
            current.append(cell)
    _settle([(c.pk, c.head_id) for c in current])
    if not stale:
        return 0, 0
    # A key's embedding never changes: computed once, when missing.
    wanted = [t or c.key for c, t in stale] + [key_text(c.key) for c, _ in stale
                                               if c.kemb_missing]
    missing = list(dict.fromkeys(t for t in wanted if t not in cached))
    vectors, calls = embed_batch(missing)
    found = dict(zip(missing, vectors, strict=True))
    rows = []
    for cell, text in stale:
        vec = found.get(text or cell.key) or unpack_vector(cached[text or cell.key])
        kvec = None
        if cell.kemb_missing:
            kvec = found.get(key_text(cell.key)) or unpack_vector(cached[key_text(cell.key)])
        rows.append((cell.pk, cell.head_id, cell.embedded_text, text,
                     vector_literal(vec) if text else None,
                     vector_literal(kvec) if kvec is not None else None))
    _update_cell_embeddings(rows)
    return len(stale), calls


def _update_cell_embeddings(rows: list[tuple[int, int | None, str, str, str | None,
                                             str | None]]) -> None:
    """One UPDATE for all refreshed cells; the guard skips a cell whose head moved (or that
    was re-embedded by its own commit) since it was read."""
    with connection.cursor() as cur:
        cur.execute(
            "WITH refreshed AS (UPDATE memory_cell AS c SET embedded_text = v.text,"
            " embedding = v.emb::vector,"
            " key_embedding = COALESCE(v.kemb::vector, c.key_embedding), vector_stale = true,"
            " embed_pending = false"
            " FROM unnest(%s::bigint[], %s::bigint[], %s::text[], %s::text[], %s::text[],"
            " %s::text[]) AS v(id, head, old, text, emb, kemb)"
            " WHERE c.id = v.id AND c.embedded_text = v.old"
            " AND c.head_id IS NOT DISTINCT FROM v.head RETURNING c.id)"
            " DELETE FROM memory_frontiervector AS f USING refreshed"
            " WHERE f.cell_id = refreshed.id",
            [[r[i] for r in rows] for i in range(6)])


def _settle(cells: list[tuple[int, int | None]]) -> None:
    """Clear ``embed_pending`` of cells whose embedding is current, unless the head moved."""
    if cells:
        with connection.cursor() as cur:
            cur.execute("UPDATE memory_cell AS c SET embed_pending = false"
                        " FROM unnest(%s::bigint[], %s::bigint[]) AS v(id, head)"
                        " WHERE c.id = v.id AND c.head_id IS NOT DISTINCT FROM v.head",
                        [[c[0] for c in cells], [c[1] for c in cells]])


# --- the background pass of a deferred embedder -------------------------------------------------


def embed_after_commit(*, namespace_id: int) -> None:
    """Under a deferred embedder, embed what the namespace's commits left pending: on the
    background thread with ``PMEM_EMBED_ASYNC`` (the default), else now. An embedder fault
    leaves it pending for the sweep."""
    if not getattr(embedder_from_settings(), "deferred", False):
        return
    if settings.PMEM_EMBED_ASYNC:
        _embedder.request(namespace_id)
        return
    try:
        embed_pending(namespace_id=namespace_id)
    except EmbeddingError as exc:
        log.warning("embeddings of namespace %s left pending: %s", namespace_id, exc)


def embed_pending(*, namespace_id: int) -> int:
    """Embed the namespace's pending cells and its committed observations without a vector,
    :data:`EMBED_CHUNK` texts at a time, until none is left; returns how many it embedded.
    One process at a time embeds a namespace (a session advisory lock): the others' requests
    return at once, and the holder looks again after releasing it, so nothing a commit marked
    meanwhile is stranded. Raises ``EmbeddingError`` (what is left stays pending)."""
    done = 0
    while True:
        with connection.cursor() as cur:
            cur.execute("SELECT pg_try_advisory_lock(%s, %s)", [_EMBED_LOCK_CLASS, namespace_id])
            if not cur.fetchone()[0]:
                return done
        try:
            done += _embed_all_pending(namespace_id)
        finally:
            with connection.cursor() as cur:
                cur.execute("SELECT pg_advisory_unlock(%s, %s)", [_EMBED_LOCK_CLASS, namespace_id])
        if not _anything_pending(namespace_id):
            return done


def _anything_pending(namespace_id: int) -> bool:
    # Cells only: an observation with neither text nor facts never gets a vector, and the
    # next commit's request (or beat) takes observations committed after this pass.
    return Cell.objects.filter(namespace_id=namespace_id, embed_pending=True).exists()


def _embed_all_pending(namespace_id: int) -> int:
    return (_embed_cells(namespace_id) + _embed_evidence(namespace_id)
            + _embed_messages(namespace_id))


def _embed_cells(namespace_id: int) -> int:
    done = 0
    while True:
        with connection.cursor() as cur:
            cur.execute("SELECT id FROM memory_cell WHERE namespace_id = %s AND embed_pending"
                        " ORDER BY id LIMIT %s", [namespace_id, EMBED_CHUNK // 2])
            ids = [row[0] for row in cur.fetchall()]
        if not ids:
            break
        refreshed, _ = cells_refresh_embeddings(cell_ids=ids)
        done += refreshed
    return done


def _embed_evidence(namespace_id: int) -> int:
    """Committed observations of the namespace without an embedding, in id order (one whose
    text and facts are both empty is passed over)."""
    done, after = 0, 0
    while True:
        rows = list(Evidence.objects.filter(namespace_id=namespace_id, embedding__isnull=True,
                                            state=Evidence.State.COMMITTED, pk__gt=after)
                    .order_by("pk").only("id", "text", "facts")[:EMBED_CHUNK])
        if not rows:
            return done
        after = rows[-1].pk
        texts = {e.pk: evidence_text(e.text, e.facts) for e in rows}
        texts = {pk: t for pk, t in texts.items() if t}
        vectors, _ = embed_batch(list(texts.values()))
        with connection.cursor() as cur:
            cur.execute("UPDATE memory_evidence AS e SET embedding = v.emb::vector"
                        " FROM unnest(%s::bigint[], %s::text[]) AS v(id, emb)"
                        " WHERE e.id = v.id AND e.embedding IS NULL",
                        [list(texts), [vector_literal(v) for v in vectors]])
        done += len(texts)


# The messages of committed sessions without a vector (memory_evidencemessage, migration 0022:
# rows a trigger writes with the session, and writes again when an erase redacts it).
_UNEMBEDDED_MESSAGES_SQL = """
SELECT m.id, m.line FROM memory_evidencemessage m JOIN memory_evidence e ON e.id = m.evidence_id
 WHERE m.namespace_id = %s AND m.embedding IS NULL AND m.id > %s AND e.state = 'committed'
 ORDER BY m.id LIMIT %s
"""


def _embed_messages(namespace_id: int) -> int:
    """Committed sessions' messages of the namespace without an embedding, in id order. A
    message rewritten meanwhile (an erase) is a new row: the old one's vector is not written."""
    done, after = 0, 0
    while True:
        with connection.cursor() as cur:
            cur.execute(_UNEMBEDDED_MESSAGES_SQL, [namespace_id, after, EMBED_CHUNK])
            rows = cur.fetchall()
        if not rows:
            return done
        after = rows[-1][0]
        vectors, _ = embed_batch([line for _, line in rows])
        with connection.cursor() as cur:
            cur.execute("UPDATE memory_evidencemessage AS m SET embedding = v.emb::vector"
                        " FROM unnest(%s::bigint[], %s::text[]) AS v(id, emb)"
                        " WHERE m.id = v.id AND m.embedding IS NULL",
                        [[i for i, _ in rows], [vector_literal(v) for v in vectors]])
        done += len(rows)


def messages_after_commit(*, namespace_id: int) -> None:
    """A commit (or an erase) wrote sessions' message rows, which have no vector yet: under a
    deferred embedder its background pass embeds them with the rest; under another, now (the
    commit embedded its cells and observations itself, not these)."""
    if getattr(embedder_from_settings(), "deferred", False):
        embed_after_commit(namespace_id=namespace_id)
    else:
        messages_embed(namespace_id=namespace_id)


def messages_embed(*, namespace_id: int) -> int:
    """Embed, now, the namespace's committed messages without a vector (an embedder that is
    not deferred: after the commit, in the committing thread; a deferred one's background
    pass does it with the rest). One check of a partial index when there are none. Never
    raises for an embedder fault: the messages rank by their words until the sweep."""
    with connection.cursor() as cur:
        cur.execute("SELECT EXISTS (SELECT 1 FROM memory_evidencemessage"
                    " WHERE namespace_id = %s AND embedding IS NULL)", [namespace_id])
        if not cur.fetchone()[0]:
            return 0
    try:
        return _embed_messages(namespace_id)
    except EmbeddingError as exc:
        log.warning("message embeddings of namespace %s left pending: %s", namespace_id, exc)
        return 0


# --- before a read ------------------------------------------------------------------------------

# An observation the background pass will embed: committed, without a vector, with a text or a
# fact that has a value (evidence_text is empty otherwise, and it is never embedded).
_UNEMBEDDED_EVIDENCE_SQL = """
SELECT EXISTS (SELECT 1 FROM memory_evidence e
                WHERE e.namespace_id = %s AND e.embedding IS NULL AND e.state = 'committed'
                  AND (btrim(e.text) <> '' OR jsonb_path_exists(COALESCE(e.facts, '[]'),
                       '$[*] ? (@.value != null)')))
"""


_PENDING_CELLS_SQL = ("SELECT EXISTS (SELECT 1 FROM memory_cell"
                      " WHERE namespace_id = %s AND embed_pending)")


def embed_before_read(*, namespace_id: int, observations: bool = False) -> int:
    """Embed, now, what the namespace's acknowledged commits left for the background pass,
    before a read ranks by similarity (SPEC §11.1: a read never misses a committed item).
    ``observations``: the raw reads' rows (committed observations); else the cells.

    The commit stays fast (the vectors still come after it); a read right after a write pays
    for the few texts still pending, and nothing once the background pass has been — a check
    of a partial index. It waits for a background pass under way in the namespace (the same
    advisory lock) rather than embedding beside it. Raises ``EmbeddingError``."""
    if not getattr(embedder_from_settings(), "deferred", False):
        return 0
    with connection.cursor() as cur:  # one indexed EXISTS: all a settled namespace pays
        cur.execute(_UNEMBEDDED_EVIDENCE_SQL if observations else _PENDING_CELLS_SQL,
                    [namespace_id])
        if not cur.fetchone()[0]:
            return 0
    with connection.cursor() as cur:
        cur.execute("SELECT pg_advisory_lock(%s, %s)", [_EMBED_LOCK_CLASS, namespace_id])
    try:
        return _embed_evidence(namespace_id) if observations else _embed_cells(namespace_id)
    finally:
        with connection.cursor() as cur:
            cur.execute("SELECT pg_advisory_unlock(%s, %s)", [_EMBED_LOCK_CLASS, namespace_id])


def embed_pending_all() -> int:
    """The sweep's catch-up: every namespace with pending cells, unembedded observations or
    unembedded messages (the messages under any embedder)."""
    with connection.cursor() as cur:
        cur.execute("SELECT DISTINCT namespace_id FROM memory_evidencemessage"
                    " WHERE embedding IS NULL")
        sessions = [row[0] for row in cur.fetchall()]
    if not getattr(embedder_from_settings(), "deferred", False):
        return sum(messages_embed(namespace_id=ns) for ns in sessions)
    with connection.cursor() as cur:
        cur.execute("SELECT DISTINCT namespace_id FROM memory_cell WHERE embed_pending"
                    " UNION SELECT DISTINCT namespace_id FROM memory_evidence"
                    " WHERE embedding IS NULL AND state = 'committed'")
        namespaces = sorted({*(row[0] for row in cur.fetchall()), *sessions})
    total = 0
    for namespace_id in namespaces:
        try:
            total += embed_pending(namespace_id=namespace_id)
        except EmbeddingError as exc:
            log.warning("embeddings of namespace %s left pending: %s", namespace_id, exc)
    return total


#: The deferred embedder's thread (memory.background): a burst of commits is one batch.
_embedder: KeyedQueue[int] = KeyedQueue(
    "pmem-embedder", lambda namespace_id: embed_pending(namespace_id=namespace_id),
    quiet=QUIET, max_delay=MAX_DELAY, nice=BACKGROUND_NICE)


def embeddings_wait(timeout: float | None = None) -> bool:
    """Wait for this process's background embedder to be idle (benchmarks, imports, tests)."""
    return _embedder.wait(timeout)
