"""What several reads show the same way: how much of a long text a row carries, a cell's status
from its head, and an observation as graphs, lists and a version's provenance show it.

A graph node, a list row or a provenance entry carries the head of an observation's text, never
its facts, its extraction or its embedding: the whole is one link away. Copied
whole into every node, one observation of 500 facts on one key makes a 3.4 GB graph.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from django.db import connection

from memory.domain import CellStatus, vocabulary
from memory.models import Version

#: Characters of an observation's text a graph node or a provenance entry carries.
GRAPH_TEXT_CHARS = 500
#: Characters of a text or a value a list row carries (the page of the thing shows it whole).
LIST_TEXT_CHARS = 200
#: Characters of an operation's raw model output a graph node or a log row carries: one
#: annotation call's output is stored on every operation it produced (the observation's page
#: shows it whole, once).
RAW_OUTPUT_CHARS = 2000
#: Rows fetched per round trip by the exports' server-side cursors.
EXPORT_CHUNK = 2000


def cell_status(head: Version | None) -> CellStatus:
    """The status a head gives its cell (:func:`memory.domain.vocabulary.cell_status`)."""
    return vocabulary.cell_status(head.status if head is not None else None)


def evidence_heads(ids: Iterable[int], chars: int = GRAPH_TEXT_CHARS) -> dict[int, dict[str, Any]]:
    """Observations as graphs and lists show them, in one statement, by seq: ``id, seq, source,
    received_at``, the text cut to ``chars`` in SQL (``text``), its whole length
    (``text_chars``) and whether it was cut (``text_truncated``)."""
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    with connection.cursor() as cur:
        cur.execute("SELECT id, seq, source, received_at, left(text, %s), length(text)"
                    " FROM memory_evidence WHERE id = ANY(%s) ORDER BY seq", [chars, wanted])
        rows = cur.fetchall()
    return {i: {"id": i, "seq": seq, "source": source, "received_at": received, "text": text,
                "text_chars": length, "text_truncated": length > chars}
            for i, seq, source, received, text, length in rows}


def stored_json(value: Any) -> Any:
    """A jsonb column read by a cursor (Django's connection loads jsonb as text), decoded as
    the model's JSONField would."""
    return json.loads(value) if isinstance(value, str) else value
