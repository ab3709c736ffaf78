"""Cell embeddings refreshed after a commit, outside it (SPEC §7).

A commit writes a moved cell's ``key: value`` embedding itself when the vectors computed
before it hold the new text (they usually do). What they missed — a rollback reinstating an
older value, a key merged into another key's name — is embedded here, after the transaction:
no model or embedding call ever sits inside one.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence

from django.db import connection
from django.db.models import BooleanField, ExpressionWrapper, Q

from memory.domain.render import embedding_text, key_text
from memory.llm.embedding import EmbeddingError, embed_batch
from memory.llm.vectors import unpack_vector
from memory.models import Cell

from .batch import Applied
from .binding import vector_literal

log = logging.getLogger("pmem.embeddings")


def refresh_after_commit(applied: Sequence[Applied], vectors: dict[str, str] | None = None) -> int:
    """Refresh the ``key: value`` embeddings of cells whose head moved and whose new vector
    the commit did not write. Never raises for an embedder fault: the embeddings stay stale
    (``embedded_text`` tells) and refresh on the cell's next commit. Returns the embedding
    calls it made."""
    cell_ids = {a.cell.pk for a in applied
                if a.cell is not None and a.decision is not None and not a.embedded}
    if not cell_ids:
        return 0
    try:
        return cells_refresh_embeddings(cell_ids=cell_ids, cached=vectors)[1]
    except EmbeddingError as exc:
        log.warning("cell embeddings left stale (embedder failed): %s", exc)
        return 0


def cells_refresh_embeddings(*, cell_ids: Collection[int],
                             cached: dict[str, str] | None = None) -> tuple[int, int]:
    """Embed every listed cell whose embedded text no longer matches ``key: head value``,
    taking vectors from ``cached`` (text -> packed vector) where it has them and embedding
    the rest in one batch. Returns (cells refreshed, embedding calls made).

    A concurrent head change between reading and writing is caught by the conditional
    UPDATE (the text must still be what was embedded); it refreshes on its own commit."""
    cached = cached or {}
    stale = []
    cells = (Cell.objects.filter(pk__in=list(cell_ids)).select_related("head")
             .only("key", "embedded_text", "head__value")
             .annotate(kemb_missing=ExpressionWrapper(Q(key_embedding__isnull=True),
                                                      output_field=BooleanField())))
    for cell in cells:
        text = embedding_text(cell.key, cell.head.value) if cell.head else ""
        if text != cell.embedded_text or cell.kemb_missing:
            stale.append((cell, text))
    if not stale:
        return 0, 0
    wanted = [t or c.key for c, t in stale] + [key_text(c.key) for c, _ in stale]
    missing = list(dict.fromkeys(t for t in wanted if t not in cached))
    vectors, calls = embed_batch(missing)
    found = dict(zip(missing, vectors, strict=True))
    rows = []
    for cell, text in stale:
        vec = found.get(text or cell.key) or unpack_vector(cached[text or cell.key])
        kvec = found.get(key_text(cell.key)) or unpack_vector(cached[key_text(cell.key)])
        rows.append((cell.pk, cell.embedded_text, text, vector_literal(vec) if text else None,
                     vector_literal(kvec)))
    _update_cell_embeddings(rows)
    return len(stale), calls


def _update_cell_embeddings(rows: list[tuple[int, str, str, str | None, str]]) -> None:
    """One UPDATE for all refreshed cells; the ``embedded_text`` guard skips a cell whose
    head moved (and was re-embedded by its own commit) since it was read."""
    with connection.cursor() as cur:
        cur.execute(
            "WITH refreshed AS (UPDATE memory_cell AS c SET embedded_text = v.text,"
            " embedding = v.emb::vector, key_embedding = v.kemb::vector, vector_stale = true"
            " FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[], %s::text[])"
            " AS v(id, old, text, emb, kemb) WHERE c.id = v.id AND c.embedded_text = v.old"
            " RETURNING c.id)"
            " DELETE FROM memory_frontiervector AS f USING refreshed"
            " WHERE f.cell_id = refreshed.id",
            [[r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
             [r[3] for r in rows], [r[4] for r in rows]])
