"""Reads narrowed by facts' metadata and by relevance, and what a version carries beside its id
(CONTRACT "One application credential, many users' memories"; docs/decisions.md 120-123).

- :func:`version_details`: each version's ordinal (its ``vN``) and metadata, for answers that
  name versions by id.
- :func:`narrow_cells`: the frontier list of cells whose current version's metadata holds a
  filter.
- :func:`frontier_read_filtered` / :func:`frontier_read_as_of_filtered`: the frontier read
  among those cells only.
- :func:`with_min_score`: a read without its items scored below a cutoff.

A filter is looked up in ``version_head_metadata_idx`` (migration 0014): the heads that carry
metadata, indexed with their namespace, so a filtered read costs what its matches cost. When a
filter matches many heads (more than :data:`EXACT_AT_MOST`), the frontier index's walk is
filtered instead, as the unfiltered read walks it; whichever way, the answer is exact: a walk
that comes back short is replaced by the exact ranking.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import F, Func, JSONField, QuerySet, Value

from memory.domain import DISCLOSURES, HEAD_STATUSES, Status, vocabulary
from memory.domain.metadata import Metadata
from memory.domain.render import CellText, render_cell, render_context
from memory.models import Cell, Namespace, Version
from memory.selectors import (
    FRONTIER_HEADER,
    ORDERED_HEADER,
    RAW_HEADER,
    ReadResult,
    _cell_texts,
    _query_vector,
    _vector_search_settings,
    cell_summary,
)
from memory.services.binding import vector_literal

#: Up to this many matching heads, a filtered frontier read ranks them all exactly (a few
#: milliseconds); beyond, it walks the frontier index with the filter.
EXACT_AT_MOST = 2000

_HEADS = ", ".join(f"'{s}'" for s in sorted(HEAD_STATUSES))
# The form of version_head_metadata_idx: the same expression and predicate, so PostgreSQL
# proves the index applies. The namespace is compared again, plainly.
_MATCH = (f"pmem_ns_metadata(v.namespace_id, v.metadata)"
          f" @> pmem_ns_metadata(%(ns)s, %(filter)s::jsonb)"
          f" AND v.metadata IS NOT NULL AND v.status IN ({_HEADS}) AND v.namespace_id = %(ns)s")

_EXACT_SQL = f"""
SELECT c.id, c.embedding <=> %(q)s::vector AS d
  FROM memory_version v JOIN memory_cell c ON c.head_id = v.id
 WHERE {_MATCH} AND c.embedding IS NOT NULL
 LIMIT %(cap)s
"""

# The unfiltered read's two branches (memory.selectors._FRONTIER_SQL), each joined to the head.
_WALK_SQL = f"""
SELECT id, d FROM (
    (SELECT f.cell_id AS id, f.embedding <=> %(q)s::vector AS d
       FROM memory_frontiervector f
       JOIN memory_cell c ON c.id = f.cell_id JOIN memory_version v ON v.id = c.head_id
      WHERE f.namespace_id = %(ns)s AND {_MATCH}
      ORDER BY f.embedding <=> %(q)s::vector LIMIT %(k)s)
    UNION ALL
    (SELECT c.id, c.embedding <=> %(q)s::vector
       FROM memory_cell c JOIN memory_version v ON v.id = c.head_id
      WHERE c.namespace_id = %(ns)s AND c.vector_stale AND c.embedding IS NOT NULL AND {_MATCH}
      ORDER BY 2 LIMIT %(k)s)
) AS merged ORDER BY d, id LIMIT %(k)s
"""


def version_details(ids: Iterable[int | None]) -> dict[int, tuple[int, Metadata | None]]:
    """``id -> (ordinal, metadata)`` of the versions named (ids of no version are left out).
    One statement on the primary key."""
    wanted = sorted({i for i in ids if isinstance(i, int)})
    if not wanted:
        return {}
    return {vid: (ordinal, metadata) for vid, ordinal, metadata in
            Version.objects.filter(pk__in=wanted).values_list("id", "ordinal", "metadata")}


def _ns_metadata(namespace: Any, metadata: Any) -> Func:
    return Func(namespace, metadata, function="pmem_ns_metadata", output_field=JSONField())


def narrow_cells(qs: QuerySet[Cell], *, namespace: Namespace,
                 metadata: Metadata) -> QuerySet[Cell]:
    """The cells of ``qs`` whose head's metadata holds every entry of ``metadata``, found
    through the index of heads' metadata."""
    return (qs.alias(head_meta=_ns_metadata(F("head__namespace_id"), F("head__metadata")))
            .filter(head_meta__contains=_ns_metadata(Value(namespace.pk),
                                                     Value(metadata, output_field=JSONField())),
                    head__metadata__isnull=False, head__status__in=sorted(HEAD_STATUSES),
                    head__namespace_id=namespace.pk))


def _ranked(namespace: Namespace, literal: str, metadata: Metadata,
            k: int) -> list[tuple[int, float]]:
    """``(cell id, distance)`` of the ``k`` nearest matching heads, exactly."""
    params: dict[str, Any] = {"q": literal, "ns": namespace.pk, "filter": json.dumps(metadata),
                              "k": k, "cap": EXACT_AT_MOST + 1}
    with connection.cursor() as cur:
        cur.execute(_EXACT_SQL, params)
        rows = cur.fetchall()
        if len(rows) > EXACT_AT_MOST:
            _vector_search_settings()
            cur.execute(_WALK_SQL, params)
            walked = cur.fetchall()
            if len(walked) >= k:
                return [(int(i), float(d)) for i, d in walked]
            cur.execute(_EXACT_SQL, {**params, "cap": None})  # a short walk: rank them all
            rows = cur.fetchall()
    return sorted(((int(i), float(d)) for i, d in rows), key=lambda r: (r[1], r[0]))[:k]


def frontier_read_filtered(*, namespace: Namespace, query: str, metadata: Metadata, k: int = 12,
                           disclose: Iterable[str] = ()) -> ReadResult:
    """The frontier read (SPEC §7) among the cells whose current version's metadata holds
    ``metadata``: their top-k by cosine, one line each, in the unfiltered read's form."""
    wanted = [d for d in DISCLOSURES if d in set(disclose)]
    literal = vector_literal(_query_vector(query))
    with transaction.atomic():
        ranked = _ranked(namespace, literal, metadata, k)
        by_id = Cell.objects.select_related("head").defer(
            "embedding", "key_embedding", "embedded_text").in_bulk([r[0] for r in ranked])
    found = [(by_id[cell_id], distance) for cell_id, distance in ranked if cell_id in by_id]
    texts = _cell_texts([cell for cell, _ in found], wanted)
    context = render_context(texts, wanted, header=FRONTIER_HEADER)
    items = [{**cell_summary(c), "score": round(1 - distance, 4), "line": render_cell(t, wanted)}
             for (c, distance), t in zip(found, texts, strict=True)]
    return ReadResult("frontier", context, items, len(context))


# memory.selectors._FRONTIER_AS_OF_SQL with the head at T's metadata compared (no index: the
# read as of T walks every key already).
_AS_OF_SQL = f"""
SELECT c.id, c.key, h.version_id, h.status, v.value, d.d FROM (
    SELECT c.id, c.key_embedding <=> %(q)s::vector AS d FROM memory_cell c
     WHERE c.namespace_id = %(ns)s AND c.key_embedding IS NOT NULL) AS d
  JOIN memory_cell c ON c.id = d.id
 CROSS JOIN LATERAL (
     SELECT s.version_id, s.status, s.until FROM memory_versionspan s
      WHERE s.cell_id = c.id AND s.status IN ({_HEADS}) AND s.since <= %(t)s
      ORDER BY s.since DESC, s.id DESC LIMIT 1) AS h
  JOIN memory_version v ON v.id = h.version_id
 WHERE (h.until IS NULL OR h.until > %(t)s) AND v.metadata @> %(filter)s::jsonb
 ORDER BY d.d, c.id LIMIT %(k)s
"""


def frontier_read_as_of_filtered(*, namespace: Namespace, query: str, as_of: datetime,
                                 metadata: Metadata, k: int = 12,
                                 disclose: Iterable[str] = ()) -> ReadResult:
    """The frontier read as memory was at ``as_of`` among the cells whose head then carried
    ``metadata`` (a version's metadata never changes). As the unfiltered read as of T: ranked
    by the keys' embeddings; only ``alternatives`` is disclosed."""
    from memory.history import alternatives as alternatives_at

    with connection.cursor() as cur:
        cur.execute(_AS_OF_SQL, {"q": vector_literal(_query_vector(query)), "ns": namespace.pk,
                                 "t": as_of, "k": k, "filter": json.dumps(metadata)})
        rows = cur.fetchall()
    shown = ["alternatives"] if "alternatives" in set(disclose) else []
    texts, items = [], []
    for cell_id, key, version, status, value, distance in rows:
        alts: tuple[str, ...] = ()
        if shown and status == Status.CONTESTED:
            alts = tuple(a["value"] for a in alternatives_at(
                Cell(pk=cell_id, namespace=namespace, key=key), as_of))
        text = CellText(key=key, value=value, status=vocabulary.cell_status(status),
                        support=0, alternatives=alts)
        texts.append(text)
        items.append({"key": key, "value": value, "status": text.status, "version": version,
                      "score": round(1 - float(distance), 4),
                      "line": render_cell(text, shown if alts else [])})
    context = render_context(texts, shown, header=FRONTIER_HEADER)
    note = f"as of {as_of.isoformat()}" + (
        "; support and history are disclosed for the present only, left out"
        if set(disclose) - {"alternatives"} else "")
    return ReadResult("frontier", context, items, len(context), note=note)


def with_min_score(result: ReadResult, min_score: float) -> ReadResult:
    """``result`` without the items scored below ``min_score``, its context rebuilt from the
    lines it keeps (each mode's context is its header and one line per item)."""
    kept = [i for i in result.items if float(i.get("score", 1.0)) >= min_score]
    if len(kept) == len(result.items):
        return result
    if result.mode == "frontier":
        lines, header = [i["line"] for i in kept], FRONTIER_HEADER
    elif result.mode == "raw_ordered":
        lines, header = [f"[t={i['seq']}] {i['text']}" for i in kept], ORDERED_HEADER
    else:
        lines, header = [i["text"] for i in kept], RAW_HEADER
    context = "\n".join([header, *lines])
    cut = len(result.items) - len(kept)
    note = "; ".join(n for n in (result.note, f"{cut} item(s) scored below min_score") if n)
    return ReadResult(result.mode, context, kept, len(context), note=note,
                      available=result.available)
