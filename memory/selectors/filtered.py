"""Reads narrowed by facts' metadata and by relevance (CONTRACT "One application credential, many users' memories").

- :func:`frontier_read_filtered`: the frontier read among those cells only (as of T:
  :func:`memory.selectors.search.frontier_read_as_of` with ``metadata``).
- :func:`with_min_score`: a read without its items scored below a cutoff.

A filter is looked up in ``version_head_metadata_idx`` (migration 0015): the heads that carry
metadata, indexed with their namespace, so a filtered read costs what its matches cost. When a
filter matches many heads (more than :data:`EXACT_AT_MOST`), the frontier index's walk is
filtered instead, as the unfiltered read walks it; whichever way, the answer is exact: a walk
that comes back short is replaced by the exact ranking.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from django.db import connection, transaction

from memory.domain import HEAD_STATUSES
from memory.domain.metadata import Metadata
from memory.domain.readmodes import read_mode_spec
from memory.models import Namespace
from memory.services.binding import vector_literal

from .evidence import EVIDENCE_HEADER
from .search import (
    FRONTIER_HEADER,
    ORDERED_HEADER,
    RAW_HEADER,
    ReadResult,
    frontier_render,
    query_vector,
    vector_search_settings,
)

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

# The unfiltered read's two branches (memory.selectors.search._FRONTIER_SQL), each joined to the head.
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


def filtered_candidates(namespace: Namespace, literal: str, metadata: Metadata,
                        k: int) -> list[tuple[int, float]]:
    """``(cell id, distance)`` of the ``k`` nearest matching heads, exactly."""
    params: dict[str, Any] = {"q": literal, "ns": namespace.pk, "filter": json.dumps(metadata),
                              "k": k, "cap": EXACT_AT_MOST + 1}
    with connection.cursor() as cur:
        cur.execute(_EXACT_SQL, params)
        rows = cur.fetchall()
        if len(rows) > EXACT_AT_MOST:
            vector_search_settings()
            cur.execute(_WALK_SQL, params)
            walked = cur.fetchall()
            if len(walked) >= k:
                return [(int(i), float(d)) for i, d in walked]
            cur.execute(_EXACT_SQL, {**params, "cap": None})  # a short walk: rank them all
            rows = cur.fetchall()
    return sorted(((int(i), float(d)) for i, d in rows), key=lambda r: (r[1], r[0]))[:k]


def frontier_read_filtered(*, namespace: Namespace, query: str, metadata: Metadata, k: int = 12,
                           disclose: Iterable[str] = ()) -> ReadResult:
    """The ``frontier_cosine`` read (SPEC §7) among the cells whose current version's metadata
    holds ``metadata``: their top-k by cosine, one line each, in the unfiltered read's form
    (the filtered ``frontier`` read: memory.selectors.recall.frontier_hybrid_read)."""
    literal = vector_literal(query_vector(namespace, query))
    with transaction.atomic():
        ranked = filtered_candidates(namespace, literal, metadata, k)
    return frontier_render(namespace=namespace, mode="frontier_cosine", disclose=disclose,
                           scored=[(cell_id, {"score": round(1 - distance, 4)})
                                   for cell_id, distance in ranked])


def heads_matching(*, namespace_id: int, cell_ids: list[int], metadata: Metadata) -> set[int]:
    """The listed cells whose current version's metadata holds ``metadata``."""
    if not cell_ids:
        return set()
    with connection.cursor() as cur:
        cur.execute("SELECT c.id FROM memory_cell c JOIN memory_version v ON v.id = c.head_id"
                    " WHERE c.namespace_id = %s AND c.id = ANY(%s) AND v.metadata @> %s::jsonb",
                    [namespace_id, cell_ids, json.dumps(metadata)])
        return {int(row[0]) for row in cur.fetchall()}


def with_min_score(result: ReadResult, min_score: float) -> ReadResult:
    """``result`` without the items scored below ``min_score``, its context rebuilt from the
    lines it keeps (each mode's context is its header and one line per item)."""
    kept = [i for i in result.items if float(i.get("score", 1.0)) >= min_score]
    if len(kept) == len(result.items):
        return result
    if read_mode_spec(result.mode).reads_cells:
        lines, header = [i["line"] for i in kept], FRONTIER_HEADER
    elif result.mode == "evidence":
        lines, header = [i["text"] for i in kept], EVIDENCE_HEADER
    elif result.mode == "raw_ordered":
        lines, header = [f"[t={i['seq']}] {i['text']}" for i in kept], ORDERED_HEADER
    else:
        lines, header = [i["text"] for i in kept], RAW_HEADER
    context = "\n".join([header, *lines])
    cut = len(result.items) - len(kept)
    note = "; ".join(n for n in (result.note, f"{cut} item(s) scored below min_score") if n)
    return ReadResult(result.mode, context, kept, len(context), note=note,
                      available=result.available)
