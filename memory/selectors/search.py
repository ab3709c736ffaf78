"""The reads an agent's query makes (SPEC §7): the frontier by meaning (now, or as of a past
time), and the raw observations by meaning, the retrieval baseline. Each returns a
:class:`ReadResult`: the context to put in a prompt and its parts. Selectors never call a model
beyond the query's embedding; :mod:`memory.reads` composes these with the model steps.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import DatabaseError, connection, transaction
from django.db.models import F, Window
from django.db.models.functions import Left, RowNumber
from pgvector.django import CosineDistance

from memory.domain import DISCLOSURES, HEAD_STATUSES, Status, vocabulary
from memory.domain.render import (
    CellText,
    ClosedVersion,
    evidence_text,
    render_cell,
    render_context,
)
from memory.llm.embedding import embed_texts
from memory.models import Cell, Evidence, Namespace, SupportEdge, Version
from memory.services.binding import vector_literal
from memory.services.embeddings import embed_before_read, namespace_embedder_check

from .cells import SNIPPET_SOURCE_CHARS, VECTOR_COLUMNS, cell_summary
from .history import alternatives as history_alternatives
from .history import first_pages
from .shapes import cell_status, stored_json


@dataclass(frozen=True)
class ReadResult:
    mode: str
    context: str
    items: list[dict[str, Any]]
    context_chars: int
    note: str = ""
    available: bool = True

    def as_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"mode": self.mode, "context": self.context, "items": self.items,
                                "context_chars": self.context_chars}
        if self.note:
            body["note"] = self.note
        if not self.available:
            body["available"] = False
        return body


FRONTIER_HEADER = "Current memory (one line per key; each value shown holds now):"
RAW_HEADER = "Retrieved observations (most similar first):"
ORDERED_HEADER = "Retrieved observations in arrival order ([t=N]: larger N is newer):"


def query_vector(namespace: Namespace, query: str, *, observations: bool = False) -> list[float]:
    """The query's embedding, once the namespace's vectors are known to be the same
    embedder's (memory.services.embeddings.EmbedderMismatch otherwise) and what its
    acknowledged commits left to embed is embedded (SPEC §11.1): the cells', or with
    ``observations`` the committed observations' (the raw reads)."""
    namespace_embedder_check(namespace)
    vector = embed_texts([query])[0]
    embed_before_read(namespace_id=namespace.pk, observations=observations)
    return vector


#: HNSW candidate list of the vector reads. Measured by ``pmem_bench perf`` (tie-aware
#: recall@12 against an exact scan, m=16, ef_construction=64): at 100k cells 100 gives 0.973
#: (p95 5.7 ms), 200 gives 0.981 (p95 8.6 ms); the exact scan takes 47 ms.
FRONTIER_EF_SEARCH = 200


def vector_search_settings() -> None:
    """Inside the read's transaction: a wider HNSW candidate list, and (pgvector ≥ 0.8)
    iterative scans so filtering by namespace cannot starve the top-k."""
    with connection.cursor() as cur:
        cur.execute(f"SET LOCAL hnsw.ef_search = {FRONTIER_EF_SEARCH}")
        try:
            with transaction.atomic():
                cur.execute("SET LOCAL hnsw.iterative_scan = 'relaxed_order'")
        except DatabaseError:
            pass  # older pgvector: plain post-filtered scan


# Top-k over the frontier index (HNSW, filtered by namespace with iterative scans) merged with
# an exact scan of the cells whose head moved since the index last held them (vector_stale,
# at most PMEM_FRONTIER_FLUSH_AT of them between flushes; see memory.services.frontier).
_FRONTIER_SQL = """
SELECT id, d FROM (
    (SELECT f.cell_id AS id, f.embedding <=> %(q)s::vector AS d
       FROM memory_frontiervector f
      WHERE f.namespace_id = %(ns)s
      ORDER BY f.embedding <=> %(q)s::vector LIMIT %(k)s)
    UNION ALL
    (SELECT c.id, c.embedding <=> %(q)s::vector
       FROM memory_cell c
      WHERE c.namespace_id = %(ns)s AND c.vector_stale
        AND c.head_id IS NOT NULL AND c.embedding IS NOT NULL
      ORDER BY 2 LIMIT %(k)s)
) AS merged ORDER BY d, id LIMIT %(k)s
"""


def frontier_read(*, namespace: Namespace, query: str, k: int = 12,
                  disclose: Iterable[str] = (), mode: str = "frontier_cosine") -> ReadResult:
    """Top-k cells by cosine over their ``key: value`` embeddings, one line each: the paper's
    ranking (SPEC §7; the default frontier read fuses it with a lexical one, memory.selectors.recall)."""
    literal = vector_literal(query_vector(namespace, query))
    ranked = frontier_candidates(namespace_id=namespace.pk, vector=literal, k=k)
    return frontier_render(namespace=namespace, mode=mode, disclose=disclose, scored=[
        (cell_id, {"score": round(1 - float(distance), 4)}) for cell_id, distance in ranked])


def frontier_candidates(*, namespace_id: int, vector: str, k: int) -> list[tuple[int, float]]:
    """The top-k ``(cell id, cosine distance)`` of the frontier for a query's embedding (a
    pgvector literal): the HNSW index and the stale cells, exactly merged."""
    with transaction.atomic():
        vector_search_settings()
        with connection.cursor() as cur:
            cur.execute(_FRONTIER_SQL, {"q": vector, "ns": namespace_id, "k": k})
            return [(int(i), float(d)) for i, d in cur.fetchall()]


def frontier_render(*, namespace: Namespace, mode: str, disclose: Iterable[str],
                    scored: list[tuple[int, dict[str, Any]]]) -> ReadResult:
    """The frontier read's answer for ranked cells, each ``(cell id, its score fields)``: one
    line per cell with the disclosures asked for, under the frontier header."""
    wanted = [d for d in DISCLOSURES if d in set(disclose)]
    by_id = Cell.objects.select_related("head").defer(*VECTOR_COLUMNS).in_bulk(
        [i for i, _ in scored])
    found = [(by_id[cell_id], fields) for cell_id, fields in scored if cell_id in by_id]
    texts = _cell_texts([cell for cell, _ in found], wanted)
    context = render_context(texts, wanted, header=FRONTIER_HEADER)
    items = [{**cell_summary(c), **fields, "line": render_cell(t, wanted)}
             for (c, fields), t in zip(found, texts, strict=True)]
    return ReadResult(mode, context, items, len(context))


#: Versions of each key the ``history`` disclosure looks at (the newest).
DISCLOSED_HISTORY = 50


# As of T, cells are ranked by their key's embedding (a key's name does not change over time;
# the ``key: value`` embeddings are of the present values) among the cells that had a head at T.
_FRONTIER_AS_OF_SQL = f"""
SELECT c.id, c.key, h.version_id, h.status, v.value, d.d, v.ordinal, v.metadata, v.expires_at
  FROM (
    SELECT c.id, c.key_embedding <=> %(q)s::vector AS d FROM memory_cell c
     WHERE c.namespace_id = %(ns)s AND c.key_embedding IS NOT NULL) AS d
  JOIN memory_cell c ON c.id = d.id
 CROSS JOIN LATERAL (
     SELECT s.version_id, s.status, s.until FROM memory_versionspan s
      WHERE s.cell_id = c.id AND s.status IN ({", ".join(f"'{s}'" for s in sorted(HEAD_STATUSES))})
        AND s.since <= %(t)s ORDER BY s.since DESC, s.id DESC LIMIT 1) AS h
  JOIN memory_version v ON v.id = h.version_id
 WHERE (h.until IS NULL OR h.until > %(t)s){{metadata}}
 ORDER BY d.d, c.id LIMIT %(k)s
"""


def frontier_read_as_of(*, namespace: Namespace, query: str, as_of: datetime, k: int = 12,
                        disclose: Iterable[str] = (),
                        metadata: dict[str, Any] | None = None) -> ReadResult:
    """The frontier read as memory was at ``as_of`` (SPEC §9): the top-k cells that had a head
    at T, by cosine over their keys' embeddings, each with the value and status it had then;
    ``alternatives`` disclosed as of T (``support`` and ``history`` disclose the present only,
    so they are left out and the answer says so). ``metadata``: only the cells whose head at T
    carried each of its entries (a version's metadata never changes; no index: the read as of
    T walks every key already)."""
    wanted = [d for d in DISCLOSURES if d in set(disclose)]
    literal = vector_literal(query_vector(namespace, query))
    params: dict[str, Any] = {"q": literal, "ns": namespace.pk, "t": as_of, "k": k}
    condition = ""
    if metadata:
        condition, params["filter"] = " AND v.metadata @> %(filter)s::jsonb", json.dumps(metadata)
    with connection.cursor() as cur:
        cur.execute(_FRONTIER_AS_OF_SQL.format(metadata=condition), params)
        rows = cur.fetchall()
    texts, items = [], []
    for cell_id, key, version, status, value, distance, ordinal, metadata, expires_at in rows:
        alts: tuple[str, ...] = ()
        if "alternatives" in wanted and status == Status.CONTESTED:
            cell = Cell(pk=cell_id, namespace=namespace, key=key)
            alts = tuple(a["value"] for a in history_alternatives(cell, as_of))
        text = CellText(key=key, value=value, status=vocabulary.cell_status(status),
                        support=0, alternatives=alts)
        texts.append(text)
        items.append({"key": key, "value": value, "status": text.status, "version": version,
                      "ordinal": ordinal, "metadata": stored_json(metadata),
                      "expires_at": expires_at, "score": round(1 - float(distance), 4),
                      "line": render_cell(text, ["alternatives"] if alts else [])})
    shown = [d for d in wanted if d == "alternatives"]
    context = render_context(texts, shown, header=FRONTIER_HEADER)
    note = (f"as of {as_of.isoformat()}" + (
        "; support and history are disclosed for the present only, left out"
        if set(wanted) - {"alternatives"} else ""))
    return ReadResult("frontier", context, items, len(context), note=note)


def _cell_texts(cells: list[Cell], disclose: list[str]) -> list[CellText]:
    """Materialized cells with the disclosures asked for, in two queries at most."""
    alternatives: dict[int, list[str]] = {}
    history: dict[int, list[ClosedVersion]] = {}
    sources: dict[int, list[str]] = {}
    ids = [c.pk for c in cells]
    if ids and "alternatives" in disclose:
        for cell_id, value in Version.objects.filter(
                cell_id__in=ids, status=Status.ALTERNATIVE).order_by("id").values_list(
                "cell_id", "value"):
            alternatives.setdefault(cell_id, []).append(value)
    if ids and "history" in disclose:
        # The closed versions among each key's newest DISCLOSED_HISTORY (SPEC §10: a read
        # does not grow with the length of a key's history).
        for cell_id, entries in first_pages(cells, DISCLOSED_HISTORY).items():
            history[cell_id] = [ClosedVersion(e.value, e.status) for e in entries
                                if e.status not in HEAD_STATUSES
                                and e.status != Status.ALTERNATIVE]
    if ids and "support" in disclose:
        # The newest three non-empty texts per head, cut in SQL: a head with thousands of
        # support edges costs three short strings, not every supporting text.
        heads = {c.head_id: c.pk for c in cells}
        newest = (SupportEdge.objects.filter(version_id__in=list(heads), evidence__isnull=False)
                  .exclude(evidence__text="")
                  .annotate(rank=Window(RowNumber(), partition_by=[F("version_id")],
                                        order_by=F("id").desc()))
                  .filter(rank__lte=3).order_by("version_id", "-id"))
        for version_id, text in newest.values_list(
                "version_id", Left("evidence__text", SNIPPET_SOURCE_CHARS)):
            sources.setdefault(heads[version_id], []).append(text)
    return [
        CellText(key=c.key, value=c.head.value if c.head else None, status=cell_status(c.head),
                 support=c.head.support if c.head else 0, sources=tuple(sources.get(c.pk, ())),
                 alternatives=tuple(alternatives.get(c.pk, ())),
                 history=tuple(history.get(c.pk, ())))
        for c in cells
    ]


def evidence_line(e: Evidence) -> str:
    """An observation on one line, as the raw reads show it. The facts are read only when there
    is no text (a deferred column is loaded on access, one statement per row)."""
    facts = None if e.text.strip() else e.facts
    return " ".join(evidence_text(e.text, facts).split())


def _load_facts_of_textless(rows: Sequence[Evidence]) -> None:
    """A raw line is the text, else the facts (``evidence_text``): load the facts of the rows
    without text, and only theirs, in one statement."""
    textless = [e for e in rows if not e.text.strip()]
    if textless:
        facts = dict(Evidence.objects.filter(pk__in=[e.pk for e in textless])
                     .values_list("id", "facts"))
        for e in textless:
            e.facts = facts.get(e.pk)


def raw_read(*, namespace: Namespace, query: str, k: int = 10, ordered: bool = False,
             as_of: datetime | None = None) -> ReadResult:
    """Top-k evidence by cosine (the retrieval baseline); ``ordered`` tags each line with its
    arrival index ``[t=seq]`` and sorts by it. As of T: the observations committed by T."""
    vector = query_vector(namespace, query, observations=True)
    with transaction.atomic():
        vector_search_settings()
        found = Evidence.objects.filter(namespace=namespace, embedding__isnull=False)
        if as_of is not None:
            found = found.filter(committed_at__lte=as_of)
        rows = list(found
                    .only("id", "seq", "text", "source", "observed_at", "received_at")
                    .annotate(distance=CosineDistance("embedding", vector))
                    .order_by("distance")[:k])
    _load_facts_of_textless(rows)
    if ordered:
        rows.sort(key=lambda e: e.seq)
        lines = [f"[t={e.seq}] {evidence_line(e)}" for e in rows]
        header, mode = ORDERED_HEADER, "raw_ordered"
    else:
        lines = [evidence_line(e) for e in rows]
        header, mode = RAW_HEADER, "raw"
    context = "\n".join([header, *lines])
    items = [{"id": e.id, "seq": e.seq, "text": line, "score": round(1 - float(e.distance), 4),
              "source": e.source, "observed_at": e.observed_at, "received_at": e.received_at}
             for e, line in zip(rows, lines, strict=True)]
    return ReadResult(mode, context, items, len(context))


def evidence_for_pruning(ids: list[int]) -> dict[int, Evidence]:
    """The observations a raw read returned, with their embeddings and dates (the pruned
    read compares them pairwise); the facts only of those without text."""
    rows = Evidence.objects.defer("extracted", "facts").in_bulk(ids)
    _load_facts_of_textless(list(rows.values()))
    return rows
