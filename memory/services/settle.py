"""Marking observations settled: ONE UPDATE for the evidence rows a commit committed, and the
notice (``pg_notify``) that ``?wait=1`` listens for, delivered when the commit commits."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection

from memory.domain import SETTLED_CHANNEL, EvidenceState
from memory.models import EMBED_DIM

from .binding import Float4Array, bound_cursor, vector_slot


@dataclass(frozen=True)
class Settled:
    """What the commit writes on one evidence row besides ``committed``."""

    evidence_id: int
    extracted: dict[str, Any] | None = None  # replaces the stored extraction when given
    vector: Any = None  # the evidence embedding, when the commit computed it
    chat_calls: int = 0  # added to the row's costs
    embed_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


_COSTS = ("chat_calls", "embed_calls", "prompt_tokens", "completion_tokens")


def notify_settled(evidence_ids: Sequence[int]) -> None:
    """Announce that these observations settled (``?wait=1`` listens: memory.selectors.
    settled). Inside a transaction PostgreSQL delivers it only if that commits; outside one,
    at once. A payload stays far below PostgreSQL's 8000 bytes."""
    ids = [str(i) for i in evidence_ids]
    with connection.cursor() as cur:
        for start in range(0, len(ids), 400):
            cur.execute("SELECT pg_notify(%s, %s)",
                        [SETTLED_CHANNEL, ",".join(ids[start:start + 400])])


def mark_committed(done: Sequence[Settled], now: datetime) -> None:
    """ONE UPDATE for the committed evidence rows: committed, with the extraction result and
    the evidence vector where the commit computed them, and what planning cost; and the
    notice that they settled, delivered when the commit's transaction commits."""
    if not done:
        return
    notify_settled([d.evidence_id for d in done])
    vectors: list[Any] = []
    at = [vector_slot(vectors, d.vector) for d in done]
    costs = ", ".join(f"{c} = e.{c} + v.{c}" for c in _COSTS)
    with bound_cursor() as cur:
        cur.execute(
            "UPDATE memory_evidence AS e SET state = %(state)b, committed_at = %(now)b,"
            f" error = '', extracted = COALESCE(v.extracted, e.extracted), {costs},"
            " embedding = COALESCE((%(embs)b::float4[])[v.at * %(dim)b + 1 :"
            " (v.at + 1) * %(dim)b]::vector, e.embedding)"
            " FROM unnest(%(ids)b::bigint[], %(extracted)b::jsonb[], %(at)b::int[],"
            " %(chat_calls)b::int[], %(embed_calls)b::int[], %(prompt_tokens)b::int[],"
            " %(completion_tokens)b::int[])"
            f" AS v(id, extracted, at, {', '.join(_COSTS)}) WHERE e.id = v.id",
            {"state": str(EvidenceState.COMMITTED), "now": now,
             "ids": [d.evidence_id for d in done],
             "extracted": [json.dumps(d.extracted, cls=DjangoJSONEncoder)
                           if d.extracted is not None else None for d in done],
             "at": at, "embs": Float4Array(vectors, EMBED_DIM), "dim": EMBED_DIM,
             **{c: [getattr(d, c) for d in done] for c in _COSTS}})
