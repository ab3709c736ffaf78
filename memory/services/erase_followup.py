"""What an erase leaves for after its commit: re-embedding redacted observations, and the
VACUUM (or rewrite) that removes the dead tuples still holding erased values on disk. Run by a
Celery task the erase enqueues on commit, and by beat — never inside the request."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from django.conf import settings
from django.db import connection
from django.utils import timezone

from memory.llm.embedding import embed_texts
from memory.models import EMBED_DIM, EraseAudit, Evidence

from .binding import Float4Array, bound_cursor
from .erase_redact import json_text
from .ingest import evidence_text

log = logging.getLogger("pmem.erase")

#: Redacted observations re-embedded per statement by erase_followup.
REEMBED_BATCH = 256
#: The tables whose dead tuples hold erased bytes until vacuumed (TOAST goes with them).
ERASE_TABLES = ("memory_version", "memory_cell", "memory_evidence", "memory_evidencemessage",
                "memory_operation", "memory_keyalias", "memory_supportedge", "memory_tombstone",
                "memory_frontiervector", "memory_changeevent")
_VACUUM_LOCK = (0x504D, 0x4552)  # "PM", "ER": one follow-up at a time


def evidence_reembed(*, evidence_ids: Sequence[int]) -> int:
    """Embed redacted observations again (outside any transaction: the embedder may be a
    remote call). Only rows still without an embedding are written, so a concurrent run
    does nothing twice. Returns how many are left without one (the embedder failed)."""
    if not evidence_ids:
        return 0
    rows = list(Evidence.objects.filter(pk__in=list(evidence_ids), embedding__isnull=True)
                .only("id", "text", "facts"))
    if not rows:
        return 0
    try:
        vectors = embed_texts([evidence_text(e) for e in rows])
    except Exception:  # noqa: BLE001 — left for erase_followup; the row is just not retrieved
        log.warning("re-embedding %d redacted observations failed", len(rows), exc_info=True)
        return len(rows)
    # Only where the text is still the one embedded: a second erase may have redacted the
    # row again meanwhile (then the next run embeds the newer text).
    with bound_cursor() as cur:
        cur.execute(
            "UPDATE memory_evidence AS e SET embedding ="
            " (%b::float4[])[(r.n - 1) * %b + 1 : r.n * %b]::vector"
            " FROM unnest(%b::bigint[], %b::text[], %b::text[]) WITH ORDINALITY"
            " AS r(id, text, facts, n)"
            " WHERE e.id = r.id AND e.embedding IS NULL AND e.text = r.text"
            " AND e.facts IS NOT DISTINCT FROM r.facts::jsonb",
            [Float4Array(vectors, EMBED_DIM), EMBED_DIM, EMBED_DIM, [e.pk for e in rows],
             [e.text for e in rows], [json_text(e.facts) for e in rows]])
    return 0


def erase_followup(*, budget: int = 20 * REEMBED_BATCH) -> dict[str, int]:
    """What an erase leaves for later, run by a Celery task (enqueued on the erase's commit,
    and by beat): re-embed redacted observations still without an embedding (found through
    the partial index evidence_unembedded_idx), then VACUUM the erase tables once if an erase
    is waiting for it. One run at a time (an advisory lock); a run that finds the lock taken
    returns at once, the running one re-checks before it ends. Never inside a transaction."""
    done = {"reembedded": 0, "vacuumed": 0}
    with connection.cursor() as cur:
        cur.execute("SELECT pg_try_advisory_lock(%s, %s)", list(_VACUUM_LOCK))
        if not cur.fetchone()[0]:
            return done
    try:
        while done["reembedded"] < budget:
            ids = list(Evidence.objects.filter(embedding__isnull=True, state="committed")
                       .order_by("id").values_list("id", flat=True)[:REEMBED_BATCH])
            if not ids or evidence_reembed(evidence_ids=ids):
                break  # nothing left, or the embedder is failing: beat tries again later
            done["reembedded"] += len(ids)
        while True:  # audits written while a VACUUM ran need one more
            waiting = list(EraseAudit.objects.filter(vacuumed_at__isnull=True)
                           .values_list("id", flat=True))
            if not waiting:
                break
            if settings.PMEM_ERASE_REWRITE:
                erase_rewrite()
            else:
                _vacuum()
            EraseAudit.objects.filter(pk__in=waiting).update(vacuumed_at=timezone.now())
            done["vacuumed"] += len(waiting)
    finally:
        with connection.cursor() as cur:
            cur.execute("SELECT pg_advisory_unlock(%s, %s)", list(_VACUUM_LOCK))
    return done


def erase_rewrite(tables: Sequence[str] = ERASE_TABLES) -> list[str]:
    """Rewrite the erase tables (``VACUUM FULL``: new files, indexes rebuilt, the old files
    unlinked), so that no byte of an erased value stays in a table file's free space. One
    table at a time: each is locked (ACCESS EXCLUSIVE) only while it is rewritten, which takes
    about as long as copying it. Never inside a transaction. Returns the tables rewritten."""
    with connection.cursor() as cur:
        for table in tables:
            cur.execute(f"VACUUM (FULL, ANALYZE) {table}")
    return list(tables)


def _vacuum() -> None:
    """Dead tuples and index entries still hold erased bytes until vacuumed; a plain VACUUM
    frees their space for reuse without overwriting it (erase_rewrite does)."""
    with connection.cursor() as cur:
        cur.execute(f"VACUUM (INDEX_CLEANUP ON) {', '.join(ERASE_TABLES)}")
