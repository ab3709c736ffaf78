"""What an operation would do, told before a person confirms it: the operation is decided by
the very code that applies it (:class:`memory.services.batch.Batch`, on the cell locked as a
commit locks it) and the transaction is rolled back, so nothing is written, and the outcome
the confirmation names is the one the write will have — unless the cell moves meanwhile, which
the write's own refusal then says."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction

from memory.domain import InvalidOperation, OpInput, OpType, Status
from memory.domain.model import normalize_key
from memory.models import Namespace, Version

from .batch import Batch, CellNotFound


@dataclass(frozen=True)
class Outcome:
    """The cell after the operation. ``refused``: why it would be refused (nothing else set).
    ``head_ordinal`` is None for a version the operation would make (``new``)."""

    refused: str = ""
    empty: bool = False
    head_value: str | None = None
    head_ordinal: int | None = None
    head_status: str = ""
    new: bool = False
    changed: bool = True
    alternatives: tuple[str, ...] = field(default=())


def operation_preview(*, namespace: Namespace, key: str, op: OpType | str,
                      value: str | None = None, version_id: int | None = None) -> Outcome:
    """The outcome of one explicit operation, computed by applying it and rolling it back."""
    item = OpInput(key=key, op=OpType(op), value=value, version_id=version_id)
    with transaction.atomic():
        try:
            batch = Batch.open(namespace=namespace, keys=[key],
                               creating=[key] if item.creates else [], named=[version_id])
            cell = batch.overlay.cell(normalize_key(key), creating=item.creates)
            before = batch.overlay.head(cell) if cell is not None else None
            before_id = before.id if before is not None else None
            batch.apply([(item, "preview")], explicit=True)
        except InvalidOperation as exc:
            transaction.set_rollback(True)
            return Outcome(refused=exc.reason)
        except CellNotFound:
            transaction.set_rollback(True)
            return Outcome(refused="there is no such key")
        assert cell is not None
        head = batch.overlay.head(cell)
        alternatives = tuple(r.value for r in batch.overlay.alternatives(cell))
        transaction.set_rollback(True)
    if head is None:
        return Outcome(empty=True, changed=before_id is not None)
    ordinal = None if head.new else (Version.objects.filter(pk=head.id)
                                     .values_list("ordinal", flat=True).first())
    return Outcome(head_value=head.value, head_ordinal=ordinal, head_status=str(head.status),
                   new=head.new, changed=head.id != before_id,
                   alternatives=alternatives if head.status == Status.CONTESTED else ())
