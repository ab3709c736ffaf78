"""Which operations of a page were undone, and by what: the log marks an undone row (and
offers no second Undo, which could only be refused or change nothing), and names the
operation an undo undid. Two statements on the page's ids."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memory.models import Namespace, Operation


def undo_marks(namespace: Namespace, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    """``operation id -> {"undone_by": {id, actor, at}, "undoes": id}`` for the ids named."""
    wanted = [i for i in ids if isinstance(i, int)]
    if not wanted:
        return {}
    marks: dict[int, dict[str, Any]] = {}
    for op_id, actor, at, undoes in (Operation.objects
                                     .filter(namespace=namespace, payload__undoes__in=wanted)
                                     .order_by("id")
                                     .values_list("id", "actor", "created_at", "payload__undoes")):
        marks.setdefault(int(undoes), {}).setdefault("undone_by",
                                                     {"id": op_id, "actor": actor, "at": at})
    for op_id, undoes in (Operation.objects.filter(pk__in=wanted, payload__has_key="undoes")
                          .values_list("id", "payload__undoes")):
        if isinstance(undoes, int):
            marks.setdefault(op_id, {})["undoes"] = undoes
    return marks


def is_undone(namespace: Namespace, operation_id: int) -> bool:
    return Operation.objects.filter(namespace=namespace, payload__undoes=operation_id).exists()
