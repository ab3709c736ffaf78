"""Privacy erase (SPEC §6): demotion is not erasure.

Erasing a key hard-deletes its versions (and so their values), the cell with its embeddings
and derived text, its aliases, operations, tombstones and support edges, and redacts the
erased values from every observation of the namespace (text, structured facts, extraction
results, embeddings). An audit row without content remains. Afterwards a VACUUM removes the
dead tuples and index entries that would otherwise still hold the values on disk.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.db import connection, transaction
from django.db.models import Q

from memory.domain import normalize_key
from memory.llm.embedding import embed_texts
from memory.models import (
    Cell,
    EraseAudit,
    Evidence,
    KeyAlias,
    Namespace,
    Operation,
    SupportEdge,
    Tombstone,
    Version,
)

from .graph import CellNotFound
from .observations import evidence_text

REDACTED = "[erased]"
ERASE_TABLES = ("memory_version", "memory_cell", "memory_evidence", "memory_operation",
                "memory_keyalias", "memory_supportedge", "memory_tombstone",
                "memory_frontiervector")


def _redactor(values: list[str]) -> re.Pattern[str] | None:
    """One case-insensitive pattern for every erased value, longest first, whitespace-tolerant."""
    parts = sorted({v.strip() for v in values if v.strip()}, key=len, reverse=True)
    if not parts:
        return None
    alternatives = [r"\s+".join(re.escape(w) for w in p.split()) for p in parts]
    return re.compile("|".join(alternatives), re.IGNORECASE)


def _redact_json(data: Any, pattern: re.Pattern[str]) -> Any:
    if data is None:
        return None
    return json.loads(pattern.sub(REDACTED, json.dumps(data, ensure_ascii=False)))


def cell_erase(*, namespace: Namespace, key: str, actor: str, vacuum: bool = True) -> EraseAudit:
    """Erase ``key`` from ``namespace`` for good. Raises :class:`CellNotFound`.

    One transaction holds the cell's row lock while it deletes and redacts; redacted evidence
    loses its embedding (it was computed from the erased text) and is re-embedded after."""
    norm = normalize_key(key)
    with transaction.atomic():
        cell = Cell.objects.select_for_update().filter(namespace=namespace, key=norm).first()
        if cell is None:
            alias = KeyAlias.objects.filter(namespace=namespace, alias=norm).first()
            if alias is None:
                raise CellNotFound(norm)
            cell = Cell.objects.select_for_update().get(pk=alias.cell_id)
        values = list(Version.objects.filter(cell=cell).values_list("value", flat=True))
        names = [cell.key, *KeyAlias.objects.filter(cell=cell).values_list("alias", flat=True)]
        pattern = _redactor(values)
        redacted_ids = _redact_evidence(namespace, pattern) if pattern else []
        versions = Version.objects.filter(cell=cell)
        Cell.objects.filter(pk=cell.pk).update(head=None)
        SupportEdge.objects.filter(version__cell=cell).delete()
        Tombstone.objects.filter(version__cell=cell).delete()
        Operation.objects.filter(Q(cell=cell) | Q(namespace=namespace, key__in=names)).delete()
        n_versions = versions.count()
        versions.update(supersedes=None, alternative_of=None, created_by=None)
        versions.delete()
        KeyAlias.objects.filter(cell=cell).delete()
        cell.delete()
        audit = EraseAudit.objects.create(namespace=namespace, key=cell.key, actor=actor,
                                          versions_erased=n_versions,
                                          evidence_redacted=len(redacted_ids))
    _reembed(redacted_ids)
    if vacuum:
        _vacuum()
    return audit


def _redact_evidence(namespace: Namespace, pattern: re.Pattern[str]) -> list[int]:
    changed: list[int] = []
    for e in Evidence.objects.filter(namespace=namespace).only("id", "text", "facts", "extracted"):
        text = pattern.sub(REDACTED, e.text)
        facts = _redact_json(e.facts, pattern)
        extracted = _redact_json(e.extracted, pattern)
        if text != e.text or facts != e.facts or extracted != e.extracted:
            Evidence.objects.filter(pk=e.pk).update(text=text, facts=facts, extracted=extracted,
                                                    embedding=None)
            changed.append(e.pk)
    return changed


def _reembed(evidence_ids: list[int]) -> None:
    rows = list(Evidence.objects.filter(pk__in=evidence_ids))
    texts = [evidence_text(e) for e in rows]
    try:
        vectors = embed_texts(texts)
    except Exception:  # left without an embedding, the row is simply not retrieved
        return
    for e, vector in zip(rows, vectors, strict=True):
        Evidence.objects.filter(pk=e.pk).update(embedding=vector)


def _vacuum() -> None:
    """Dead tuples and index entries still hold erased bytes until vacuumed."""
    if connection.in_atomic_block:
        return  # tests inside a transaction; VACUUM cannot run there
    with connection.cursor() as cur:
        for table in ERASE_TABLES:
            cur.execute(f"VACUUM (INDEX_CLEANUP ON) {table}")
