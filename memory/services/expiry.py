"""Facts that end (SPEC §13): a version whose expiry passed is closed by an ``expire``
operation (actor ``system:expiry``, status ``expired``).

:func:`expire_due` is the one place that decides it, and every path calls it before it looks
at a namespace: each read (``memory.selectors.fresh.expiry_checked``), each commit on the cells
it locked (``memory.services.overlay.locked_overlay``), and beat for every namespace
(:func:`expire_due_everywhere`). So no read serves a value after its instant whether or not a
background job has run, and the graph itself — history, spans, the log — says what happened.

What the operation does, by the expired version's status:

- the head (active or contested): it becomes ``expired`` and the cell empty; nothing is
  reinstated (expiry is not retraction). A contested head's alternatives end their contest as
  ``superseded`` (an empty cell has no contest);
- an alternative: it becomes ``expired``; the last one leaves its head ``active``;
- any other (superseded, contradicted, revoked): nothing — it is not current anyway.

Times: the version's spans change at its expiry instant (or at the start of its current span,
when it became current only after it: a predecessor reinstated late), not at the moment the
operation ran, so "memory as of T" is exact on both sides of the instant. The operation's own
``created_at`` is when it was recorded.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from memory.domain import (
    EXPIRE,
    EXPIRY_ACTOR,
    HEAD_STATUSES,
    OPEN_STATUSES,
    Method,
    Status,
    cell_status,
)
from memory.models import Namespace, Operation

from .changes import EventRow, events_record

#: The open statuses, as the partial index version_expiry_idx lists them.
_OPEN = sorted(s.value for s in OPEN_STATUSES)

_DUE_SQL = """
SELECT v.id, v.cell_id, v.expires_at, v.status, v.value, c.key
  FROM memory_version v JOIN memory_cell c ON c.id = v.cell_id
 WHERE v.namespace_id = %(ns)s AND v.expires_at <= %(now)s AND v.status = ANY(%(open)s)
   AND (%(cells)s::bigint[] IS NULL OR v.cell_id = ANY(%(cells)s::bigint[]))
 ORDER BY v.cell_id, v.id
"""

# Close the version's open span at ``at`` (never before it began) and open one of ``status``.
_RETYPE_SQL = """
WITH old AS (
    UPDATE memory_versionspan SET until = GREATEST(since, %(at)s)
     WHERE version_id = %(v)s AND until IS NULL RETURNING cell_id, GREATEST(since, %(at)s) AS t
), upd AS (
    UPDATE memory_version SET status = %(status)s,
           valid_to = CASE WHEN %(close)s THEN COALESCE(valid_to, %(at)s) ELSE valid_to END
     WHERE id = %(v)s
)
INSERT INTO memory_versionspan (cell_id, version_id, status, since)
SELECT cell_id, %(v)s, %(status)s, t FROM old
"""

_EMPTY_CELL_SQL = """
WITH emptied AS (
    UPDATE memory_cell SET head_id = NULL, updated_at = %(now)s, embedded_text = '',
           embedding = NULL, terms = NULL, vector_stale = true, embed_pending = false
     WHERE id = %(cell)s RETURNING id
)
DELETE FROM memory_frontiervector f USING emptied WHERE f.cell_id = emptied.id
"""


def expire_due(*, namespace_id: int, now: datetime | None = None,
               cell_ids: list[int] | None = None) -> int:
    """Expire every open version of the namespace (of ``cell_ids`` only, when given) whose
    expiry is at or before ``now``; returns how many. Cheap when nothing is due: one probe of
    version_expiry_idx. Inside the caller's transaction when there is one (a commit holding
    its cells' locks), else its own."""
    now = now or timezone.now()
    params: dict[str, Any] = {"ns": namespace_id, "now": now, "open": _OPEN, "cells": cell_ids}
    with connection.cursor() as cur:
        cur.execute(_DUE_SQL, params)
        if not cur.fetchone():
            return 0
    with transaction.atomic():
        with connection.cursor() as cur:
            cur.execute(_DUE_SQL.replace("ORDER BY v.cell_id, v.id",
                                         "ORDER BY c.key, v.id FOR UPDATE OF c, v"), params)
            due = cur.fetchall()
        # Locked in key order (as commits lock), applied in the order the instants came: an
        # alternative that ended before its head did left the head active in between.
        events = [event for version_id, cell_id, expires_at, status, value, key in sorted(
                  due, key=lambda row: (row[2], row[0]))
                  if (event := _expire_one(namespace_id, version_id, cell_id, expires_at,
                                           Status(status), value, key, now)) is not None]
        events_record(namespace_id, events)  # the feed's lock last, after the cells'
    return len(due)


def _expire_one(namespace_id: int, version_id: int, cell_id: int, at: datetime,
                status: Status, value: str, key: str, now: datetime) -> EventRow | None:
    """Expire one version; its change event (None when it was no longer open)."""
    with connection.cursor() as cur:
        # Read again under the locks: an earlier row of this loop may have changed it.
        cur.execute("SELECT status FROM memory_version WHERE id = %s", [version_id])
        status = Status(cur.fetchone()[0])
        if status not in OPEN_STATUSES:
            return None
        closed_alternatives: list[int] = []
        head_after: str | None = None
        if status in HEAD_STATUSES:
            cur.execute("SELECT id FROM memory_version WHERE cell_id = %s AND status = %s",
                        [cell_id, Status.ALTERNATIVE.value])
            closed_alternatives = [row[0] for row in cur.fetchall()]
            for alternative in closed_alternatives:
                _retype(cur, alternative, Status.SUPERSEDED, at)
            _retype(cur, version_id, Status.EXPIRED, at)
            cur.execute(_EMPTY_CELL_SQL, {"cell": cell_id, "now": now})
        else:
            _retype(cur, version_id, Status.EXPIRED, at)
            cur.execute("SELECT v.id FROM memory_cell c JOIN memory_version v ON v.id = c.head_id"
                        " WHERE c.id = %s AND v.status = %s AND NOT EXISTS (SELECT 1 FROM"
                        " memory_version a WHERE a.cell_id = c.id AND a.status = %s)",
                        [cell_id, Status.CONTESTED.value, Status.ALTERNATIVE.value])
            row = cur.fetchone()
            if row is not None:  # the contest's last alternative ended: the head stands alone
                _retype(cur, row[0], Status.ACTIVE, at, close=False)
                head_after = Status.ACTIVE.value
        cur.execute("SELECT v.id, v.status FROM memory_cell c JOIN memory_version v"
                    " ON v.id = c.head_id WHERE c.id = %s", [cell_id])
        head = cur.fetchone()
    operation = Operation.objects.create(
        namespace_id=namespace_id, cell_id=cell_id, key=key, type=EXPIRE, requested=EXPIRE,
        actor=EXPIRY_ACTOR, method=Method.RULE.value, version_id=version_id, value=value,
        reason=f"expired at {at.isoformat()}",
        payload={"version": version_id, "expires_at": at.isoformat(), "was": status.value,
                 "cell_emptied": status in HEAD_STATUSES,
                 "closed_alternatives": closed_alternatives,
                 **({"head_status": head_after} if head_after else {})})
    return EventRow(operation.pk, EXPIRE, key, version_id, value,
                    version_id if status in HEAD_STATUSES else None,
                    head[0] if head else None, Status.EXPIRED.value,
                    str(cell_status(head[1] if head else None)), EXPIRY_ACTOR,
                    Method.RULE.value, operation.reason, None)


def _retype(cur: Any, version_id: int, status: Status, at: datetime, *,
            close: bool = True) -> None:
    cur.execute(_RETYPE_SQL, {"v": version_id, "status": status.value, "at": at,
                              "close": close})


def expire_due_everywhere(now: datetime | None = None) -> int:
    """:func:`expire_due` for every namespace with something due (beat)."""
    now = now or timezone.now()
    with connection.cursor() as cur:
        cur.execute("SELECT DISTINCT namespace_id FROM memory_version"
                    " WHERE expires_at <= %s AND status = ANY(%s)", [now, _OPEN])
        namespaces = [row[0] for row in cur.fetchall()]
    done = 0
    for namespace_id in namespaces:
        if Namespace.objects.filter(pk=namespace_id).exists():
            done += expire_due(namespace_id=namespace_id, now=now)
    return done
