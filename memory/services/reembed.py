"""Re-embedding a namespace with the configured embedder (``manage.py pmem_reembed``).

Every vector of the namespace — each cell's ``key: value`` and key embeddings, each committed
observation's — is computed again, in id order, :data:`CHUNK` rows a statement (memory stays
bounded whatever the namespace's size), and each cell's lexical terms are written again with
them. Progress is kept on the namespace (``reembed``: the target embedder, the stage, the last
id done), so a run that stops is resumed where it stopped. Only at the end does the namespace
record the new embedder: until then reads refuse it (memory.services.embeddings), so no read
ever compares vectors of two embedders.

Commits may go on meanwhile: a cell whose head moves after it was read here is skipped (its
own commit writes it with the configured embedder), and rows written after the pass went by
are the configured embedder's already — provided every process runs with the same setting.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import connection
from django.db.models import Q

from memory.domain.render import embedding_text, evidence_text, key_text
from memory.llm.embedding import embed_batch, embedder_id
from memory.models import Cell, Evidence, Namespace

from .binding import vector_literal
from .embeddings import messages_embed
from .frontier import frontier_flush
from .lexical import stored_terms

CHUNK = 256
STAGES = ("cells", "evidence")

Progress = Callable[[int, int], None]


def namespaces_to_reembed() -> list[Namespace]:
    """Namespaces whose vectors are not (or not known to be) the configured embedder's."""
    return list(Namespace.objects.filter(~Q(embedder=embedder_id())).order_by("name"))


def namespace_reembed(*, namespace: Namespace, progress: Progress | None = None) -> int:
    """Re-embed the namespace (resuming a run that stopped) and record the embedder; returns
    how many rows it embedded. Raises ``EmbeddingError`` when the embedder fails (progress is
    kept: run it again)."""
    target = embedder_id()
    state: dict[str, Any] = dict(namespace.reembed or {})
    if state.get("embedder") != target:
        state = {"embedder": target, "stage": STAGES[0], "after": 0}
    total = (Cell.objects.filter(namespace=namespace).count()
             + _evidence(namespace.pk).count())
    done = _done_before(namespace.pk, state)
    for stage in STAGES[STAGES.index(state["stage"]):]:
        step = _cells_after if stage == "cells" else _evidence_after
        while True:
            _save(namespace, state)
            count, last = step(namespace.pk, state["after"])
            if last is None:
                break
            done += count
            state["after"] = last
            if progress:
                progress(done, total)
        state = {**state, "stage": STAGES[-1], "after": 0}
    messages_embed(namespace_id=namespace.pk)
    Namespace.objects.filter(pk=namespace.pk).update(embedder=target, reembed=None)
    namespace.embedder, namespace.reembed = target, None
    frontier_flush(namespace_id=namespace.pk)
    if progress:
        progress(total, total)
    return done


def _save(namespace: Namespace, state: dict[str, Any]) -> None:
    Namespace.objects.filter(pk=namespace.pk).update(reembed=state)
    namespace.reembed = state


def _evidence(namespace_id: int) -> Any:
    return Evidence.objects.filter(namespace_id=namespace_id, state=Evidence.State.COMMITTED)


def _done_before(namespace_id: int, state: dict[str, Any]) -> int:
    """Rows a stopped run embedded already (for the progress shown)."""
    if state["stage"] == "cells":
        return Cell.objects.filter(namespace_id=namespace_id, pk__lte=state["after"]).count()
    return (Cell.objects.filter(namespace_id=namespace_id).count()
            + _evidence(namespace_id).filter(pk__lte=state["after"]).count())


_CELLS_SQL = """
WITH v AS (SELECT * FROM unnest(%s::bigint[], %s::bigint[], %s::text[], %s::text[], %s::text[],
                                %s::text[]) AS v(id, head, text, emb, kemb, terms)),
done AS (
    UPDATE memory_cell AS c SET embedded_text = v.text, embedding = v.emb::vector,
           key_embedding = v.kemb::vector, terms = string_to_array(v.terms, ' '),
           embed_pending = false, vector_stale = true
      FROM v WHERE c.id = v.id AND c.head_id IS NOT DISTINCT FROM v.head
    RETURNING c.id
)
DELETE FROM memory_frontiervector AS f USING done WHERE f.cell_id = done.id
"""


def _cells_after(namespace_id: int, after: int) -> tuple[int, int | None]:
    """Re-embed the next :data:`CHUNK` cells after id ``after``: (how many, the last id)."""
    cells = list(Cell.objects.filter(namespace_id=namespace_id, pk__gt=after).order_by("pk")
                 .select_related("head").only("key", "head__value")[:CHUNK])
    if not cells:
        return 0, None
    texts = {c.pk: embedding_text(c.key, c.head.value) if c.head else "" for c in cells}
    wanted = list(dict.fromkeys([t for t in texts.values() if t]
                                + [key_text(c.key) for c in cells]))
    vectors = dict(zip(wanted, embed_batch(wanted)[0], strict=True))
    with connection.cursor() as cur:
        cur.execute(_CELLS_SQL, [
            [c.pk for c in cells], [c.head_id for c in cells], [texts[c.pk] for c in cells],
            [vector_literal(vectors[texts[c.pk]]) if texts[c.pk] else None for c in cells],
            [vector_literal(vectors[key_text(c.key)]) for c in cells],
            [stored_terms(namespace_id, c.key, c.head.value) if c.head else None
             for c in cells]])
    return len(cells), cells[-1].pk


def _evidence_after(namespace_id: int, after: int) -> tuple[int, int | None]:
    """Re-embed the next :data:`CHUNK` committed observations after id ``after``."""
    rows = list(_evidence(namespace_id).filter(pk__gt=after).order_by("pk")
                .only("id", "text", "facts")[:CHUNK])
    if not rows:
        return 0, None
    texts = [evidence_text(e.text, e.facts) for e in rows]
    embedded = iter(embed_batch([t for t in texts if t])[0])
    with connection.cursor() as cur:
        cur.execute("UPDATE memory_evidence AS e SET embedding = v.emb::vector"
                    " FROM unnest(%s::bigint[], %s::text[]) AS v(id, emb) WHERE e.id = v.id",
                    [[e.pk for e in rows],
                     [vector_literal(next(embedded)) if t else None for t in texts]])
        # A session's messages too: their old vectors, the other embedder's, go now, and
        # they are embedded again once the observations are (until then: by their words).
        cur.execute("UPDATE memory_evidencemessage SET embedding = NULL"
                    " WHERE evidence_id = ANY(%s) AND embedding IS NOT NULL",
                    [[e.pk for e in rows]])
    return len(rows), rows[-1].pk


def namespace_terms_write(*, namespace_id: int) -> int:
    """Write every headed cell's lexical terms (an import, which writes cells from a file:
    their vectors it computes, their words it leaves to this). Returns how many cells."""
    after, done = 0, 0
    while True:
        cells = list(Cell.objects.filter(namespace_id=namespace_id, pk__gt=after,
                                         head__isnull=False).order_by("pk")
                     .select_related("head").only("key", "head__value")[:CHUNK])
        if not cells:
            return done
        with connection.cursor() as cur:
            cur.execute("UPDATE memory_cell AS c SET terms = string_to_array(v.terms, ' ')"
                        " FROM unnest(%s::bigint[], %s::text[]) AS v(id, terms)"
                        " WHERE c.id = v.id",
                        [[c.pk for c in cells],
                         [stored_terms(namespace_id, c.key, c.head.value if c.head else None)
                          for c in cells]])
        after, done = cells[-1].pk, done + len(cells)

