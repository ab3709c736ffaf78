"""Nothing acknowledged waits on a lost message: leases and the sweep (CONTRACT,
``PMEM_SWEEP_EVERY``; docs/decisions.md, "The sweep").

A task is *live* for an observation when it is

- running: it holds the observation's extraction claim (a session-level advisory lock,
  which PostgreSQL drops when the session dies — a killed worker, a cut network link once
  the server notices, a database restart), or
- queued: the observation's lease has not run out. Recording an observation leases it for
  ``PMEM_SWEEP_EVERY`` seconds from its receipt (no write: ``received_at`` stands in for an
  empty ``lease_until``); a task that schedules a retry leases it for its countdown plus
  that; the sweep, for that long again when it queues it.

The sweep (Celery beat every ``PMEM_SWEEP_EVERY`` seconds, and each worker at start-up)
queues ``process_observation`` again for every unsettled observation no live task holds. A
duplicate message costs two indexed reads: extraction and commitment are idempotent
(compare-and-swap, seq order), so a re-queued observation is still committed exactly once.
A message still waiting in a long broker queue past its lease gets at most one duplicate per
``PMEM_SWEEP_EVERY``.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from memory.domain import UNSETTLED_STATES
from memory.models import Evidence

#: Unsettled observations whose extraction claim no session holds (an advisory lock on one
#: bigint key: classid = high 32 bits, objid = low 32 bits, objsubid 1). With ``leased``
#: only those whose lease ran out. A namespace being drained is no exception: the drain
#: holds its head, not the observations behind it, which are extracted in parallel by the
#: tasks queued for them (the drain extracts a head it reaches first itself).
_CLAIM_HELD = """
    EXISTS (
        SELECT 1 FROM pg_locks l
        WHERE l.locktype = 'advisory' AND l.granted
          AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND l.objsubid = 1 AND l.classid::bigint = e.id >> 32
          AND l.objid::bigint = e.id & 4294967295)
"""
_UNHELD = f"""
    SELECT e.id FROM memory_evidence e
    WHERE e.state = ANY(%(states)s)
      AND (NOT %(leased)s OR COALESCE(e.lease_until, e.received_at + make_interval(secs => %(every)s)) < now())
      AND NOT {_CLAIM_HELD}
    ORDER BY e.namespace_id, e.seq
    LIMIT %(limit)s
"""
#: Observations of other namespaces still to extract that nobody is extracting, leaving out
#: those a task is due back for after a retry (a lease longer than a queued message's): the
#: model just failed them. Read in the order of the unsettled index (namespace, seq), at most
#: ``scan`` rows, and only those tested against the locks: a long backlog costs no more.
_UNCLAIMED_ELSEWHERE = f"""
    SELECT e.id FROM (
        SELECT id FROM memory_evidence
        WHERE state = ANY(%(states)s) AND extracted IS NULL AND namespace_id <> %(namespace)s
          AND NOT (id = ANY(%(skip)s::bigint[]))
          AND (lease_until IS NULL OR lease_until <= now() + make_interval(secs => %(every)s))
        ORDER BY namespace_id, seq
        LIMIT %(scan)s
    ) e
    WHERE NOT {_CLAIM_HELD}
    LIMIT %(limit)s
"""


#: Namespaces with an unsettled observation that no drain holds (a drain's lock is the
#: two-int advisory lock (class, namespace id): ``objsubid`` 2). The namespaces are found by
#: skipping through the unsettled index one namespace at a time (a long backlog in one costs
#: one probe), at most ``scan`` of them.
_UNDRAINED = """
    WITH RECURSIVE ns(id, n) AS (
        (SELECT namespace_id, 1 FROM memory_evidence WHERE state IN ({states})
          ORDER BY namespace_id LIMIT 1)
        UNION ALL
        SELECT (SELECT namespace_id FROM memory_evidence WHERE state IN ({states})
                  AND namespace_id > ns.id ORDER BY namespace_id LIMIT 1), ns.n + 1
          FROM ns WHERE ns.id IS NOT NULL AND ns.n < %(scan)s
    )
    SELECT id FROM ns
    WHERE id IS NOT NULL AND NOT (id = ANY(%(mine)s::bigint[]))
      AND NOT EXISTS (
        SELECT 1 FROM pg_locks l
        WHERE l.locktype = 'advisory' AND l.granted
          AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND l.objsubid = 2 AND l.classid::bigint = %(lock_class)s
          AND l.objid::bigint = ns.id)
    LIMIT %(limit)s
"""


def namespaces_undrained(*, mine: list[int], lock_class: int, limit: int) -> list[int]:
    """Up to ``limit`` namespaces (not in ``mine``) with an unsettled observation that no
    drain holds now; at most ``4 * limit + len(mine)`` namespaces are looked at."""
    states = ", ".join(f"'{str(s)}'" for s in UNSETTLED_STATES)  # our own enum, not input
    with connection.cursor() as cur:
        cur.execute(_UNDRAINED.format(states=states), {
            "mine": mine, "lock_class": lock_class, "limit": limit,
            "scan": 4 * limit + len(mine)})
        return [int(row[0]) for row in cur.fetchall()]


def sweep_every() -> timedelta:
    return timedelta(seconds=max(1.0, float(settings.PMEM_SWEEP_EVERY)))


def observations_unheld(*, leased: bool = True, limit: int = 10_000) -> list[int]:
    """Ids of the unsettled observations no live task holds, leased again for
    ``PMEM_SWEEP_EVERY`` (the caller queues each). ``leased=False`` (a worker starting, after a
    crash) ignores the leases and takes every one no running task holds."""
    with connection.cursor() as cur:
        cur.execute(f"UPDATE memory_evidence SET lease_until = now()"
                    f" + make_interval(secs => %(every)s)"
                    f" WHERE id IN ({_UNHELD}) RETURNING id",
                    {"states": [str(s) for s in UNSETTLED_STATES], "leased": leased,
                     "every": sweep_every().total_seconds(), "limit": limit})
        ids = [int(row[0]) for row in cur.fetchall()]
    # RETURNING comes in no particular order: queue them namespace by namespace, in seq order.
    order = {i: (ns, seq) for i, ns, seq in
             Evidence.objects.filter(pk__in=ids).values_list("id", "namespace_id", "seq")}
    return sorted(ids, key=lambda i: order.get(i, (0, 0)))


def observations_unclaimed_elsewhere(*, namespace_id: int, limit: int,
                                     skip: list[int]) -> list[int]:
    """Ids of up to ``limit`` observations of other namespaces than ``namespace_id`` (and
    not in ``skip``) that wait for extraction with nobody extracting them, each namespace's
    oldest first; at most ``4 * limit`` candidates are read."""
    with connection.cursor() as cur:
        cur.execute(_UNCLAIMED_ELSEWHERE, {
            "states": [str(s) for s in UNSETTLED_STATES], "namespace": namespace_id,
            "skip": skip, "every": sweep_every().total_seconds(), "limit": limit,
            "scan": 4 * limit})
        return [int(row[0]) for row in cur.fetchall()]


def observation_lease(*, evidence_id: int, seconds: float) -> None:
    """A task will come back for the observation in ``seconds`` (a retry's countdown): the
    sweep leaves it alone until then, and ``PMEM_SWEEP_EVERY`` after."""
    until = timezone.now() + timedelta(seconds=seconds) + sweep_every()
    Evidence.objects.filter(pk=evidence_id, state__in=UNSETTLED_STATES).update(
        lease_until=until)


def observation_lease_end(*, evidence_id: int) -> None:
    """No message carries the observation (the broker refused it): the next sweep queues it."""
    Evidence.objects.filter(pk=evidence_id, state__in=UNSETTLED_STATES).update(
        lease_until=timezone.now() - sweep_every())
