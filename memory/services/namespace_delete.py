"""Deleting a namespace (SPEC §13): every key erased as SPEC §6 erases one, then the namespace
itself — its observations, tokens, members, webhooks, trust levels and audit rows — so that nothing of it
is reachable and its name starts empty. What remains is a :class:`NamespaceDeletion` row: who,
when, a digest of the name and counts.

Bounded work per statement, never one giant transaction: the first transaction renames the
namespace out of reach (``.deleting-<id>``: no API path, token or person finds it again, and
the name is free at once); then the keys go a batch at a time (each key by the erase's own
deletion, :func:`memory.services.erase.key_rows_delete`, about :data:`BATCH_ROWS` versions per
transaction), then the remaining operations and the observations in batches of
:data:`BATCH_ROWS`, then the namespace row with what hangs on it. A deletion that stops
half-way (a worker killed) leaves a ``.deleting-`` namespace that :func:`deletions_resume`
(beat) finishes. Nothing of the content is redacted first: every observation is deleted.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from memory.models import (
    ApiToken,
    AuditEntry,
    Cell,
    EraseAudit,
    Evidence,
    FrontierVector,
    KeyAlias,
    Membership,
    Namespace,
    NamespaceDeletion,
    Operation,
    SourceTrust,
    WebhookEndpoint,
)

from .erase import ERASE_TABLES, key_rows_delete

log = logging.getLogger("pmem.namespace_delete")

#: About how many rows one transaction deletes (a key's versions stay together: one key is
#: one statement of the erase).
BATCH_ROWS = 20_000
#: The name a namespace carries while it is being deleted: no valid name starts with a dot.
DELETING_PREFIX = ".deleting-"


@dataclass(frozen=True)
class NamespaceDeleted:
    audit: NamespaceDeletion

    def report(self) -> dict[str, Any]:
        """The answer of ``DELETE /api/v1/namespaces/{ns}/?report=1``."""
        return {"deleted": True, "name_digest": self.audit.name_digest,
                "counts": self.audit.counts}


def name_digest(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


def namespace_counts(namespace_id: int) -> dict[str, int]:
    """What the namespace holds (one statement; indexes on each table's namespace)."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT (SELECT count(*) FROM memory_cell WHERE namespace_id = %(ns)s),"
            " (SELECT coalesce(sum(version_count), 0) FROM memory_cell WHERE namespace_id = %(ns)s),"
            " (SELECT count(*) FROM memory_operation WHERE namespace_id = %(ns)s),"
            " (SELECT count(*) FROM memory_evidence WHERE namespace_id = %(ns)s),"
            " (SELECT count(*) FROM memory_apitoken WHERE namespace_id = %(ns)s),"
            " (SELECT count(*) FROM memory_membership WHERE namespace_id = %(ns)s)",
            {"ns": namespace_id})
        row = cur.fetchone()
    return dict(zip(("cells", "versions", "operations", "observations", "tokens", "members"),
                    (int(n) for n in row), strict=True))


def namespace_delete(*, namespace: Namespace, actor: str) -> NamespaceDeleted:
    """Delete ``namespace`` and everything in it; returns the audit. Runs its own
    transactions: the caller must not hold one open."""
    audit = _detach(namespace, actor)
    _finish(namespace.pk, audit)
    audit.refresh_from_db()
    return NamespaceDeleted(audit=audit)


def _detach(namespace: Namespace, actor: str) -> NamespaceDeletion:
    """ONE short transaction: the namespace out of reach under a name nobody can ask for,
    its tokens and members gone (nobody reaches it by them either), and the audit begun."""
    # Counted before the lock (seconds for a million rows, which writers must not wait for):
    # what a commit adds meanwhile is deleted all the same, uncounted.
    counts = namespace_counts(namespace.pk)
    with transaction.atomic():
        locked = Namespace.objects.select_for_update().get(pk=namespace.pk)
        audit = NamespaceDeletion.objects.create(name_digest=name_digest(locked.name),
                                                 actor=actor, counts=counts)
        Namespace.objects.filter(pk=locked.pk).update(name=f"{DELETING_PREFIX}{audit.pk}")
        ApiToken.objects.filter(namespace_id=locked.pk).delete()
        Membership.objects.filter(namespace_id=locked.pk).delete()
        # Its webhooks stop now: a deletion is no stream of erase events to its subscribers.
        WebhookEndpoint.objects.filter(namespace_id=locked.pk).delete()
    return audit


def _finish(namespace_id: int, audit: NamespaceDeletion) -> None:
    _delete_keys(namespace_id)
    _delete_in_batches("memory_operation", namespace_id)
    _delete_in_batches("memory_evidence", namespace_id)
    _delete_in_batches("memory_changeevent", namespace_id)
    with transaction.atomic():
        # The namespace row last, locked: a worker that committed into it meanwhile (an
        # observation recorded before the rename) is waited for, and its rows go here.
        Namespace.objects.select_for_update().filter(pk=namespace_id).first()
        _delete_keys_inline(namespace_id)
        Operation.objects.filter(namespace_id=namespace_id).delete()
        Evidence.objects.filter(namespace_id=namespace_id).delete()
        for model in (KeyAlias, FrontierVector, SourceTrust, EraseAudit, AuditEntry, ApiToken,
                      Membership):
            model.objects.filter(namespace_id=namespace_id).delete()
        _delete_other_dependents(namespace_id)
        Namespace.objects.filter(pk=namespace_id).delete()
        NamespaceDeletion.objects.filter(pk=audit.pk).update(finished_at=timezone.now())


def _delete_keys(namespace_id: int) -> None:
    """The keys, a transaction per batch of about BATCH_ROWS versions."""
    after = 0
    while True:
        cells = list(Cell.objects.filter(namespace_id=namespace_id, pk__gt=after).order_by("pk")
                     .values_list("pk", "version_count")[:1000])
        if not cells:
            return
        batch: list[int] = []
        rows = 0
        for pk, count in cells:
            if count + 1 >= BATCH_ROWS:  # a long key: alone
                _delete_cells(namespace_id, [pk])
                continue
            batch.append(pk)
            rows += count + 1
            if rows >= BATCH_ROWS:
                _delete_cells(namespace_id, batch)
                batch, rows = [], 0
        _delete_cells(namespace_id, batch)
        after = cells[-1][0]


#: Many keys' rows in ONE statement: the erase's deletion (erase._DELETE_KEY) for a set of
#: cells, without its check for rows outside the key pointing in — every key of the namespace
#: goes, and no row of one namespace points into another.
_DELETE_KEYS = """
WITH versions AS (DELETE FROM memory_version WHERE cell_id = ANY(%(cells)s) RETURNING id),
ops AS (DELETE FROM memory_operation WHERE cell_id = ANY(%(cells)s)),
edges AS (DELETE FROM memory_supportedge s USING versions v WHERE s.version_id = v.id),
spans AS (DELETE FROM memory_versionspan WHERE cell_id = ANY(%(cells)s)),
tombs AS (DELETE FROM memory_tombstone t USING versions v WHERE t.version_id = v.id),
aliases AS (DELETE FROM memory_keyalias WHERE cell_id = ANY(%(cells)s)),
copy AS (DELETE FROM memory_frontiervector WHERE cell_id = ANY(%(cells)s))
DELETE FROM memory_cell WHERE id = ANY(%(cells)s)
"""


def _delete_cells(namespace_id: int, cell_ids: list[int]) -> None:
    """One transaction: a key longer than a batch alone, by the erase's own statement;
    shorter ones together, by :data:`_DELETE_KEYS` (a statement per key was 7 round trips:
    a namespace of many small keys deleted at 170 versions/s)."""
    if not cell_ids:
        return
    with transaction.atomic():
        if len(cell_ids) == 1:
            key_rows_delete(namespace_id=namespace_id, cell_id=cell_ids[0])
            return
        with connection.cursor() as cur, _without_fk_checks(cur):
            cur.execute(_DELETE_KEYS, {"cells": cell_ids})


@contextmanager
def _without_fk_checks(cur: Any) -> Iterator[None]:
    """The row-by-row deferred foreign-key checks off when the role may (as the erase does):
    what goes is a whole namespace, whose rows point only at each other."""
    try:
        with transaction.atomic():
            cur.execute("SET LOCAL session_replication_role = replica")
        bypass = True
    except DatabaseError:
        bypass = False
    try:
        yield
    finally:
        if bypass:
            cur.execute("SET LOCAL session_replication_role = origin")


def _delete_keys_inline(namespace_id: int) -> None:
    """Keys a late commit made after the batches passed (inside the last transaction)."""
    for cell_id in Cell.objects.filter(namespace_id=namespace_id).values_list("pk", flat=True):
        key_rows_delete(namespace_id=namespace_id, cell_id=cell_id)


def _delete_in_batches(table: str, namespace_id: int) -> None:
    """Rows of ``table`` of the namespace, BATCH_ROWS per statement (and transaction)."""
    while True:
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute(f"DELETE FROM {table} WHERE id IN (SELECT id FROM {table}"  # noqa: S608
                        " WHERE namespace_id = %s LIMIT %s)", [namespace_id, BATCH_ROWS])
            if cur.rowcount < BATCH_ROWS:
                return


def _delete_other_dependents(namespace_id: int) -> None:
    """Rows of any other table that point at the namespace (a change feed's events, webhook
    endpoints): through the ORM, which deletes what hangs on them first."""
    handled = {KeyAlias, FrontierVector, SourceTrust, EraseAudit, AuditEntry, ApiToken,
               Membership, Operation, Evidence, Cell}
    for related in Namespace._meta.related_objects:
        model = related.related_model
        if model in handled or not isinstance(model, type):
            continue
        model._default_manager.filter(**{related.field.name: namespace_id}).delete()


def deletions_resume() -> int:
    """Finish every deletion that stopped half-way (beat); returns how many."""
    done = 0
    for namespace in Namespace.objects.filter(name__startswith=DELETING_PREFIX):
        audit_id = namespace.name[len(DELETING_PREFIX):]
        audit = NamespaceDeletion.objects.filter(pk=int(audit_id)).first() \
            if audit_id.isdigit() else None
        if audit is None:
            audit = NamespaceDeletion.objects.create(name_digest="", actor="system",
                                                     counts=namespace_counts(namespace.pk))
        _finish(namespace.pk, audit)
        done += 1
    return done


def deletions_vacuum() -> int:
    """VACUUM the tables a finished deletion emptied (dead tuples still hold the content),
    once for every deletion waiting for it. Never inside a transaction."""
    waiting = list(NamespaceDeletion.objects.filter(finished_at__isnull=False,
                                                    vacuumed_at__isnull=True)
                   .values_list("id", flat=True))
    if waiting:
        with connection.cursor() as cur:
            cur.execute(f"VACUUM (INDEX_CLEANUP ON) {', '.join(ERASE_TABLES)},"
                        " memory_versionspan")
        NamespaceDeletion.objects.filter(pk__in=waiting).update(vacuumed_at=timezone.now())
    return len(waiting)
