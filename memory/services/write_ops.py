"""The operation log's rows of a commit: one row per pending operation (and one per
predecessor a rollback reopened), written with ONE statement, ids taken up front."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection

from memory.domain import NEW, REINSTATE, Decision, Method, OpInput, Status
from memory.domain.effect_log import effects_record
from memory.models import Cell, Evidence, Namespace, Operation

from .binding import insert_rows

#: Maps an overlay id (negative: created in this batch) to the stored one.
IdMap = Callable[[int | None], int | None]


@dataclass
class PendingOp:
    """One operation row to write (a reinstate row names the operation that caused it)."""

    key: str
    cell: Cell | None
    item: OpInput
    actor: str
    type: str
    requested: str
    reason: str
    payload: dict[str, Any]
    evidence: Evidence | None
    version_ref: int | None = None
    cause: int | None = None  # reinstate rows: index of the causing operation
    decision: Decision | None = None
    invalid: str | None = None
    reinstated: tuple[int, ...] = ()
    support_refs: tuple[int, ...] = ()
    tomb_refs: tuple[int, ...] = ()
    head_before: int | None = None
    head_after: int | None = None
    new_id: int | None = None
    #: How it was decided (SPEC §3); ``actor`` is who asked.
    method: str = Method.EXPLICIT.value
    #: The cell as this operation left it, for its change event: (the named version's status,
    #: the cell's status, the head's overlay id). Later operations of the batch change the
    #: overlay, so it is taken when the operation is decided.
    after: tuple[str, str, int | None] = ("", "empty", None)



_OPERATION_COLUMNS = (
    ("id", "bigint"), ("namespace_id", "bigint"), ("cell_id", "bigint"), ("key", "varchar"),
    ("type", "varchar"), ("requested", "varchar"), ("actor", "varchar"),
    ("evidence_id", "bigint"), ("seq", "bigint"), ("version_id", "bigint"), ("value", "text"),
    ("payload", "jsonb"), ("reason", "text"), ("raw_output", "text"), ("prompt_tokens", "int"),
    ("completion_tokens", "int"), ("created_at", "timestamptz"), ("method", "varchar"),
    ("source", "varchar"))
_OPERATION_NAMES = tuple(name for name, _ in _OPERATION_COLUMNS)
assert list(_OPERATION_NAMES) == [f.attname for f in Operation._meta.concrete_fields], \
    "keep _OPERATION_COLUMNS in field order"


def write_operations(namespace: Namespace, ops: Sequence[PendingOp], op_ids: list[int],
                     ids: IdMap, now: datetime) -> list[Callable[[], Operation]]:
    rows = []
    for op, op_id in zip(ops, op_ids, strict=True):
        ev_id, seq = (op.evidence.pk, op.evidence.seq) if op.evidence else (None, None)
        first = op.cause is None  # else a reinstate row, caused by the op it names
        cause = None if first else op_ids[op.cause or 0]
        rows.append((
            op_id, namespace.pk, op.cell.pk if op.cell is not None else None, op.key, op.type,
            str(op.requested), op.actor, ev_id, seq, ids(op.version_ref),
            op.item.value if first else None, _payload(op, ids, cause),
            op.reason if first else f"rollback after operation {cause}",
            op.item.raw_output if first else "", op.item.prompt_tokens if first else 0,
            op.item.completion_tokens if first else 0, now,
            op.method if first else Method.REINSTATE.value,
            op.evidence.source if op.evidence is not None else ""))
    insert_rows("memory_operation", _OPERATION_COLUMNS, [
        (*row[:11], json.dumps(row[11], cls=DjangoJSONEncoder), *row[12:]) for row in rows])
    return [partial(_stored_operation, row, namespace, op.cell, op.evidence)
            for row, op in zip(rows, ops, strict=True)]


def _stored_operation(row: tuple[Any, ...], namespace: Namespace, cell: Cell | None,
                      evidence: Evidence | None) -> Operation:
    """The model instance of a row just inserted, built the way the ORM loads one (positional,
    no keyword parsing), with its namespace, cell and evidence attached (no query later)."""
    operation = Operation.from_db(connection.alias, _OPERATION_NAMES, row)
    cache = operation._state.fields_cache
    cache["namespace"] = namespace
    if cell is not None:
        cache["cell"] = cell
    if evidence is not None:
        cache["evidence"] = evidence
    return operation


def _payload(op: PendingOp, ids: IdMap, cause: int | None) -> dict[str, Any]:
    """An operation's log payload with stored ids (the overlay's are temporary): the version
    it named, the heads before and after, and its effects."""
    payload = dict(op.payload)
    if isinstance(payload.get("version"), int):
        payload["version"] = ids(payload["version"])
    if op.decision is not None and op.cause is None:
        payload["head_before"] = ids(op.head_before)
        payload["head_after"] = ids(op.head_after)
        new_id = op.new_id
        payload.update(effects_record(
            op.decision.effects, lambda v: ids(new_id if v == NEW else v)))
    if cause is not None:
        payload["cause"] = cause
    return payload


def reinstate_op(cause: PendingOp, index: int, version_id: int, status: Status) -> PendingOp:
    """The log row of a predecessor reopened by rollback: it names the operation that
    reopened it, so the log tells why a superseded version is open again."""
    return PendingOp(cause.key, cause.cell, cause.item, cause.actor, REINSTATE,
                     cause.item.op, "rollback", {"status": str(status)}, cause.evidence,
                     version_ref=version_id, cause=index, method=Method.REINSTATE.value,
                     after=(str(status), *cause.after[1:]))
