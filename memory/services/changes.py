"""Writing the change feed (SPEC §12): each committed operation's event, in the commit's own
transaction, with a cursor that orders the namespace's events in commit order.

The cursor comes from the namespace's :class:`memory.models.ChangeCounter` row, raised by the
statement that inserts the events; its row lock is held until the commit. So a transaction
that takes cursors after another's commits after it, and a reader never sees cursor ``c``
while one below it is still to appear. Every writer takes this lock LAST, after its cells and
evidence: none waits for a cell while holding it, so it adds no cycle to the locks commits
already take. Its ``committed_at`` is the clock when it took the lock, so it grows with the cursor.
The same statement raises ``NOTIFY pmem_changes``, which PostgreSQL delivers
only when (and if) the transaction commits.

The erase's part (:func:`erase_events`) and the retention of the erase event's key
(:func:`erase_keys_blank`) are here too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from memory.domain.changes import CHANGES_CHANNEL, ERASE

from .binding import bound_cursor
from .webhooks import webhooks_wake_on_commit


@dataclass(frozen=True)
class EventRow:
    """What the writer knows of one committed operation; the versions' ordinals and values
    (``version``, ``previous``, ``head``) are read by the insert, from the rows it wrote."""

    operation_id: int | None
    op: str
    key: str
    version_id: int | None  # the version made or touched
    value: str | None  # used when no version is named (a refused operation's asked value)
    previous_id: int | None  # the head it displaced
    head_id: int | None  # the cell's head after it
    status: str  # the version's status after it
    cell_status: str  # the cell's status after it
    actor: str
    method: str
    reason: str
    observation_id: int | None


_COLUMNS = (("operation_id", "bigint"), ("op", "varchar"), ("key", "varchar"),
            ("version_id", "bigint"), ("value", "text"), ("previous_id", "bigint"),
            ("head_id", "bigint"), ("status", "varchar"), ("cell_status", "varchar"),
            ("actor", "varchar"), ("method", "varchar"),
            ("reason", "text"), ("observation_id", "bigint"))


def _version_json(alias: str) -> str:
    return (f"CASE WHEN {alias}.id IS NULL THEN NULL ELSE jsonb_build_object('version',"
            f" {alias}.id, 'ordinal', {alias}.ordinal, 'value', {alias}.value) END")


_RECORD_SQL = f"""
WITH counter AS (
    INSERT INTO memory_changecounter (namespace_id, last) VALUES (%(ns)b::bigint, %(n)b::bigint)
    ON CONFLICT (namespace_id) DO UPDATE SET last = memory_changecounter.last + EXCLUDED.last
    RETURNING last
), inserted AS (
    INSERT INTO memory_changeevent (namespace_id, cursor, operation_id, op, key, version_id,
                                    ordinal, value, previous, head, status, cell_status, actor,
                                    method, reason, observation_id, committed_at)
    SELECT %(ns)b::bigint, (SELECT last FROM counter) - %(n)b::bigint + u.i, u.operation_id,
           u.op, u.key, u.version_id, v.ordinal, COALESCE(v.value, u.value),
           {_version_json("p")}, {_version_json("h")}, u.status, u.cell_status, u.actor,
           u.method, u.reason, u.observation_id, clock_timestamp()
      FROM unnest({", ".join(f"%({name})b::{kind}[]" for name, kind in _COLUMNS)})
           WITH ORDINALITY AS u({", ".join(name for name, _ in _COLUMNS)}, i)
      LEFT JOIN memory_version v ON v.id = u.version_id
      LEFT JOIN memory_version p ON p.id = u.previous_id
      LEFT JOIN memory_version h ON h.id = u.head_id
    RETURNING 1
)
SELECT pg_notify(%(channel)b::text, %(ns)b::bigint || ':' || (SELECT last FROM counter)),
       (SELECT count(*) FROM inserted)
"""


def events_record(namespace_id: int, rows: Sequence[EventRow]) -> None:
    """Append ``rows``, in order, as the namespace's next events — ONE statement: the cursors
    taken (the counter row locked until the commit), the events inserted, the NOTIFY raised.
    Inside the caller's transaction; its result is not read, so it may go out pipelined."""
    if not rows:
        return
    params: dict[str, object] = {
        name: [getattr(row, name) for row in rows] for name, _ in _COLUMNS}
    params.update(ns=namespace_id, n=len(rows), channel=CHANGES_CHANNEL)
    with bound_cursor() as cur:
        cur.execute(_RECORD_SQL, params)
    webhooks_wake_on_commit(namespace_id)  # the log is their outbox: deliver once committed


# ONE statement: the key's events out, the erase event in with the next cursor, the notice.
_ERASE_SQL = """
WITH gone AS (
    DELETE FROM memory_changeevent WHERE namespace_id = %(ns)s AND key = ANY(%(names)s)
), counter AS (
    INSERT INTO memory_changecounter (namespace_id, last) VALUES (%(ns)s, 1)
    ON CONFLICT (namespace_id) DO UPDATE SET last = memory_changecounter.last + 1
    RETURNING last
), inserted AS (
    INSERT INTO memory_changeevent (namespace_id, cursor, op, key, status, cell_status, actor,
                                    method, reason, committed_at)
    SELECT %(ns)s, last, %(op)s, %(key)s, '', 'empty', %(actor)s, 'explicit', 'erased',
           clock_timestamp() FROM counter
)
SELECT pg_notify(%(channel)s, %(ns)s::bigint || ':' || (SELECT last FROM counter))
"""


def erase_events(*, namespace_id: int, names: Sequence[str], key: str, actor: str) -> None:
    """The erase's part of the feed, in the erase's transaction (SPEC §6, §12): the key's
    events deleted (by the key's names, through their index: nothing else of the namespace
    is read) and one ``erase`` event naming the key appended, so a subscriber can erase its
    copy. The ``source`` of other keys' events is their observation's, read with the event:
    what the erase redacted there is redacted in the feed too."""
    with connection.cursor() as cur:
        cur.execute(_ERASE_SQL, {"ns": namespace_id, "names": list(names), "op": ERASE,
                                 "key": key, "actor": actor, "channel": CHANGES_CHANNEL})
    # Its event is delivered like a commit's: a subscriber erases its copy now, not at
    # beat's next round.
    webhooks_wake_on_commit(namespace_id)


def erase_retention() -> timedelta:
    return timedelta(seconds=settings.PMEM_CHANGES_ERASE_RETENTION)


def erase_keys_blank(now: datetime | None = None) -> int:
    """Blank the key of every ``erase`` event older than the retention (beat): after it the
    feed keeps that an erase happened, not what it erased. Returns how many."""
    before = (now or timezone.now()) - erase_retention()
    with connection.cursor() as cur:
        cur.execute("UPDATE memory_changeevent SET key = '' WHERE op = %s AND key <> ''"
                    " AND committed_at <= %s", [ERASE, before])
        return cur.rowcount


def erase_keys_forget(now: datetime | None = None) -> int:
    """:func:`erase_keys_blank`, then the dead rows that still hold the names vacuumed — with
    ``PMEM_ERASE_REWRITE``, the table rewritten (locked while it is copied), as the erase's
    follow-up does to its tables, so the names leave the files. Beat runs it; never inside a
    transaction. Returns how many keys it blanked."""
    blanked = erase_keys_blank(now)
    if blanked:
        with connection.cursor() as cur:
            cur.execute("VACUUM (FULL, ANALYZE) memory_changeevent"
                        if settings.PMEM_ERASE_REWRITE
                        else "VACUUM (INDEX_CLEANUP ON) memory_changeevent")
    return blanked
