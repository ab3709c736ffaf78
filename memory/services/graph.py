"""Typed operations a person or client asks for on a cell (SPEC §3, §4): a batch of one.

The batch, its overlay and its writer (:mod:`memory.services.batch`) are the one write path
of the graph; observations reach it through :mod:`memory.services.ingest`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from django.db import connection, transaction

from memory.domain import Item, OpInput, OpType
from memory.models import Evidence, Namespace

from .batch import Applied, Batch, CellNotFound
from .embeddings import refresh_after_commit

log = logging.getLogger("pmem.graph")

__all__ = ["Applied", "CellNotFound", "OpInput", "apply_batch", "operation_apply"]


def operation_apply(
    *,
    namespace: Namespace,
    key: str,
    op: OpType | str,
    actor: str,
    value: str | None = None,
    version_id: int | None = None,
    evidence: Evidence | None = None,
    reason: str = "",
    explicit: bool = False,
    metadata: dict[str, Any] | None = None,
) -> Applied:
    """Apply one typed operation to one key in its own transaction.

    With ``explicit=True`` (a person or API client asked for exactly this operation), an
    operation that is invalid in the cell's state raises :class:`InvalidOperation` and
    nothing is written; a missing key raises :class:`CellNotFound` unless the operation
    can create it. Otherwise an invalid operation is recorded as a noop with its reason.
    Takes the cell's row lock for the rest of the transaction.
    """
    item = OpInput(key=key, op=OpType(op), value=value, version_id=version_id, reason=reason,
                   payload={"metadata": metadata} if metadata else {})
    with transaction.atomic():
        applied = apply_batch(namespace=namespace, items=[(item, actor)], evidence=evidence,
                              explicit=explicit)[0]
    # The cell's `key: value` embedding follows its head, computed after the commit (never
    # inside a transaction: immediately here, or when an enclosing transaction commits).
    transaction.on_commit(lambda: refresh_embedding(applied))
    return applied


def refresh_embedding(applied: Applied) -> None:
    """Bring the cell an operation moved to its new ``key: value`` embedding (after the
    commit); a failure is logged, never raised: the next commit refreshes it."""
    try:
        refresh_after_commit([applied])
    except Exception:  # the operation stands; a stale embedding refreshes on the next commit
        log.exception("embedding refresh after operation %s failed", applied.operation.pk)


def apply_batch(*, namespace: Namespace, items: Sequence[Item],
                evidence: Evidence | None = None, explicit: bool = False) -> list[Applied]:
    """Apply ``items`` in order inside the caller's transaction (which must be open): lock
    every cell they name, decide each on the overlay, write. With ``explicit``, the first
    invalid item raises and the caller's transaction must be rolled back."""
    assert connection.in_atomic_block, "apply_batch needs an open transaction"
    if not items:
        return []
    batch = Batch.open(namespace=namespace, keys=[item.key for item, _ in items],
                       creating=[item.key for item, _ in items if item.creates],
                       named=[item.version_id for item, _ in items])
    batch.apply(items, evidence=evidence, explicit=explicit)
    return batch.write()
