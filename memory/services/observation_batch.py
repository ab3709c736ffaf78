"""Many observations in one request (``observations/batch/``): recorded in ONE transaction,
in the order given, with consecutive seqs; each item's idempotency key checked as the single
endpoint checks it, so a replayed batch stores nothing twice.

Recording is all or nothing: a key reused with another body (409) or any failure stores no
item. The namespace row is locked first, so two batches (or a batch and single observations)
recording at once take their seqs one after the other and see each other's keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction

from memory import metrics
from memory.models import Evidence, Namespace

from .ingest import idempotency_digest, request_digest

#: What an item may carry: the keyword arguments of ``observation_record``.
ITEM_FIELDS = frozenset({"text", "messages", "facts", "source", "observed_at",
                         "idempotency_key", "extract"})


class BatchIdempotencyConflict(Exception):
    """Item ``index`` reuses an idempotency key for another request — one recorded before
    (``first``, its id) or an earlier item of the same batch (``first`` None): nothing of the
    batch is recorded."""

    def __init__(self, index: int, first: int | None) -> None:
        where = (f"observation {first}" if first is not None
                 else "an earlier item of this batch")
        super().__init__(f"idempotency_key was already used for another request ({where}); "
                         f"send a new key with a new body; nothing of the batch was stored")
        self.index, self.first = index, first


@dataclass(frozen=True)
class BatchRecorded:
    """Per item, in the order given: its evidence, and whether this request created it
    (False: its idempotency key replayed an observation recorded before)."""

    evidence: list[Evidence]
    created: list[bool]

    @property
    def new_ids(self) -> list[int]:
        return [e.pk for e, made in zip(self.evidence, self.created, strict=True) if made]


def observations_record_batch(*, namespace: Namespace, items: list[dict[str, Any]],
                              actor: str = "") -> BatchRecorded:
    """Record ``items`` (each as ``observation_record`` takes it) in one transaction."""
    for item in items:
        unknown = set(item) - ITEM_FIELDS
        if unknown:
            raise TypeError(f"unknown observation fields: {sorted(unknown)}")
    keys = [idempotency_digest(i["idempotency_key"]) if i.get("idempotency_key") else None
            for i in items]
    asked = [request_digest(text=i.get("text") or "", facts=i.get("facts"),
                            source=i.get("source") or "", observed_at=i.get("observed_at"),
                            messages=i.get("messages"),
                            extract=bool(i.get("extract"))) if key else None
             for i, key in zip(items, keys, strict=True)]
    with transaction.atomic():
        _lock(namespace)  # before the keys are looked up: a concurrent batch waits here
        used = {e.idempotency_key: e for e in Evidence.objects.filter(
            namespace=namespace, idempotency_key__in=[k for k in keys if k])
            .defer("extracted", "embedding")}
        slots: list[Evidence | int] = []  # an earlier row, or the index of a new one
        first_in_batch: dict[str, int] = {}
        fresh: list[int] = []
        for index, key in enumerate(keys):
            if key is not None and key in used:
                first = used[key]
                if first.request_digest is not None and first.request_digest != asked[index]:
                    raise BatchIdempotencyConflict(index, first.pk)
                slots.append(first)
                continue
            if key is not None and key in first_in_batch:
                earlier = first_in_batch[key]
                if asked[earlier] != asked[index]:
                    raise BatchIdempotencyConflict(index, None)
                slots.append(earlier)
                continue
            if key is not None:
                first_in_batch[key] = index
            slots.append(index)
            fresh.append(index)
        rows = _insert(namespace, [items[i] for i in fresh], [keys[i] for i in fresh],
                       [asked[i] for i in fresh], actor)
    made = dict(zip(fresh, rows, strict=True))
    evidence = [slot if isinstance(slot, Evidence) else made[slot] for slot in slots]
    created = [isinstance(slot, int) and index == slot for index, slot in enumerate(slots)]
    metrics.OBSERVATIONS_RECORDED.inc(len(rows))
    return BatchRecorded(evidence, created)


def _lock(namespace: Namespace) -> None:
    with connection.cursor() as cur:
        cur.execute("SELECT 1 FROM memory_namespace WHERE id = %s FOR UPDATE", [namespace.pk])
        if cur.fetchone() is None:
            raise Namespace.DoesNotExist(f"no namespace with id {namespace.pk}")


def _insert(namespace: Namespace, items: list[dict[str, Any]], keys: list[str | None],
            asked: list[str | None], actor: str) -> list[Evidence]:
    """Insert ``items`` with the namespace's next consecutive seqs, in order (one INSERT).
    Inside the recording transaction, under the namespace row lock."""
    if not items:
        return []
    with connection.cursor() as cur:
        cur.execute("UPDATE memory_namespace SET next_seq = next_seq + %s WHERE id = %s"
                    " RETURNING next_seq - %s", [len(items), namespace.pk, len(items)])
        first = int(cur.fetchone()[0])
    return Evidence.objects.bulk_create([
        Evidence(namespace=namespace, seq=first + i, text=item.get("text") or "",
                 messages=item.get("messages") or None, facts=item.get("facts"),
                 source=item.get("source") or "", observed_at=item.get("observed_at"),
                 idempotency_key=key, request_digest=digest, actor=actor,
                 extract_text=bool(item.get("extract")))
        for i, (item, key, digest) in enumerate(zip(items, keys, asked, strict=True))])
