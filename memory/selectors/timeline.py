"""Moving through a key's time (SPEC §9, §10): its whole history in a few stretches of time
counted by status, the version it held at a date, where "jump to" lands, and the step back or
forward of the as-of control, one commit of its operations at a time.

Each costs the same at 100 versions and at 1,000,000: every statement is an index probe or a
LIMITed index range ((cell, ordinal), (cell, created_at), op_key_idx between two of the key's
commits), never a scan of the history.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import Q

from memory.domain import BadParameter, OpType, Status
from memory.domain.instants import parse_instant
from memory.models import Cell, Operation, Version

from .history import SPAN_AT, alternatives, count_as_of, head_as_of
from .versions import id_shaped, named_version

#: Operations are committed at microsecond resolution: "just before" one is a microsecond
#: earlier, "just after" is its own commit time (as of T includes what committed at T).
TICK = timedelta(microseconds=1)
#: How many of a key's newest operations a step reads to find where their commit began.
STEP_WALK = 20
#: The stretches a timeline is cut into unless asked otherwise, and the most it is cut into.
BUCKETS_DEFAULT = 60
BUCKETS_MAX = 500


# The stretch ends of a timeline: for each of ``buckets`` equal stretches of commit time
# between the first version and the last (by T), the last ordinal created by its end and that
# version's id — two index probes per stretch (version_cell_created_idx, then the ordinal).
_BOUNDARIES_SQL = """
WITH ends AS (
    SELECT (SELECT created_at FROM memory_version WHERE cell_id = %(cell)s AND ordinal = 1) AS lo,
           (SELECT created_at FROM memory_version WHERE cell_id = %(cell)s
             AND ordinal = %(n)s) AS hi
)
SELECT b, ends.lo + (ends.hi - ends.lo) * b / %(buckets)s AS until, x.ordinal, x.id, ends.lo
  FROM ends, generate_series(1, %(buckets)s) AS b
 CROSS JOIN LATERAL (
     SELECT v.ordinal, v.id FROM memory_version v
      WHERE v.cell_id = %(cell)s AND v.created_at = (
            SELECT max(w.created_at) FROM memory_version w WHERE w.cell_id = %(cell)s
               AND w.created_at <= ends.lo + (ends.hi - ends.lo) * b / %(buckets)s)
      ORDER BY v.ordinal DESC LIMIT 1) AS x
 ORDER BY b
"""
# Every version whose status (now, or at T) is not ``superseded``: the head, the alternatives
# and the retracted ones (revoked and contradicted are for good, SPEC §3/§4), through
# version_cell_status_idx; as of T, with the head and alternatives at T, each with its status
# then. Every other version is superseded — counted, never read.
_RARE_SQL = """
SELECT v.ordinal, {status} FROM (
    SELECT x.id, x.ordinal, x.status FROM memory_version x
     WHERE x.cell_id = %(cell)s AND x.status IN ({rare})
       AND x.ordinal + 0 <= %(n)s  -- a filter, not a range: the status index serves this
    UNION
    SELECT x.id, x.ordinal, x.status FROM memory_version x WHERE x.id = ANY(%(extra)s)
) AS v{lateral}
"""


def status_timeline(cell: Cell, *, buckets: int = BUCKETS_DEFAULT, as_of: datetime | None = None
                    ) -> dict[str, Any]:
    """The whole history (as of T: by T) in ``buckets`` equal stretches of commit time: per
    stretch, how many versions were created in it by status (now, or the status they had at
    T), and its first and last ordinal and version (to jump a window there). Statements: two
    now, five as of T; the work follows ``buckets`` and the versions that are not superseded
    (head, alternatives, retracted ones), never the length of the history."""
    buckets = max(1, min(buckets, BUCKETS_MAX))
    total = count_as_of(cell, as_of)
    out = {"key": cell.key, "total": total, "start": None, "end": None, "buckets": buckets,
           "statuses": [str(s) for s in Status], "as_of": as_of, "bins": []}
    if total == 0:
        return out
    with connection.cursor() as cur:
        cur.execute(_BOUNDARIES_SQL, {"cell": cell.pk, "n": total, "buckets": buckets})
        ends = cur.fetchall()
    rare = _rare_statuses(cell, total, as_of)
    bins, previous = [], 0
    for b, until, last_ordinal, last_version, start in ends:
        if last_ordinal <= previous:
            continue  # nothing was created in this stretch
        counts: dict[str, int] = {}
        for ordinal, status in rare:
            if previous < ordinal <= last_ordinal:
                counts[status] = counts.get(status, 0) + 1
        plain = last_ordinal - previous - sum(counts.values())
        if plain:
            counts[str(Status.SUPERSEDED)] = counts.get(str(Status.SUPERSEDED), 0) + plain
        bins.append({"bucket": b, "counts": counts, "first_ordinal": previous + 1,
                     "last_ordinal": last_ordinal, "last_version": last_version,
                     "to": until, "from": start + (until - start) * (b - 1) / b})
        previous = last_ordinal
    _first_versions(cell, bins)
    out.update(start=ends[0][4], end=ends[-1][1], bins=bins)
    return out


def _rare_statuses(cell: Cell, total: int, as_of: datetime | None) -> list[tuple[int, str]]:
    """(ordinal, status) of the versions not superseded now, or at T. One statement now,
    three as of T."""
    rare = ", ".join(f"'{s}'" for s in sorted(set(Status) - {Status.SUPERSEDED}))
    extra: list[int] = []
    if as_of is not None:
        head = head_as_of(cell, as_of)
        extra = [a["version"] for a in alternatives(cell, as_of)] if head else []
        extra += [head[0]] if head else []
    sql = _RARE_SQL.format(status="v.status" if as_of is None else "sp.status",
                           lateral="" if as_of is None else SPAN_AT, rare=rare)
    with connection.cursor() as cur:
        cur.execute(sql, {"cell": cell.pk, "n": total, "extra": extra, "t": as_of})
        return [(int(o), str(st)) for o, st in cur.fetchall()]


def _first_versions(cell: Cell, bins: list[dict[str, Any]]) -> None:
    """Each stretch's first version id (one statement on the ordinal index)."""
    with connection.cursor() as cur:
        cur.execute("SELECT o.n, (SELECT v.id FROM memory_version v WHERE v.cell_id = %s"
                    " AND v.ordinal = o.n) FROM unnest(%s::int[]) AS o(n)",
                    [cell.pk, [b["first_ordinal"] for b in bins]])
        ids = dict(cur.fetchall())
    for b in bins:
        b["first_version"] = ids.get(b["first_ordinal"])


# --- jumps and steps -------------------------------------------------------------------------


def version_at(cell: Cell, when: datetime) -> int | None:
    """The version the key's history holds at ``when``: the last one created by then, else the
    first one (a jump to a date). One statement on ``version_cell_created_idx``."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT COALESCE((SELECT id FROM memory_version WHERE cell_id = %(cell)s"
            " AND created_at <= %(t)s ORDER BY created_at DESC, ordinal DESC LIMIT 1),"
            " (SELECT id FROM memory_version WHERE cell_id = %(cell)s AND ordinal = 1))",
            {"cell": cell.pk, "t": when})
        row = cur.fetchone()
    return int(row[0]) if row and row[0] is not None else None


def resolve_jump(*, cell: Cell, text: str, as_of: datetime | None = None) -> int:
    """Where "jump to" lands: a version of the key (``v12``), a global id (``id 345``), or a
    date-time (the newest version created by then; UTC unless it names a zone). Raises
    BadParameter("jump") when it names nothing of this key."""
    text = (text or "").strip()
    if not text or len(text) > 64:
        raise BadParameter("jump", "say a version (v12), an id (id 345) or a date")
    named = named_version(cell, text)
    if named is not None:
        created = Version.objects.filter(pk=named).values_list("created_at", flat=True).first()
        if as_of is not None and created is not None and created > as_of:
            raise BadParameter("jump", f"{text} did not exist yet at that time")
        return named
    if id_shaped(text):
        raise BadParameter("jump", f"{text} is not a version of {cell.key}")
    if not re.match(r"^\d{4}-\d\d-\d\d", text):
        raise BadParameter("jump", "not a version (v12), an id (id 345) or a date")
    # A date-time, UTC unless it names a zone; a date alone is its midnight.
    moment = parse_instant(text, field="jump", zone=UTC)
    assert moment is not None
    if as_of is not None:
        moment = min(moment, as_of)
    found = version_at(cell, moment)  # the newest created by then, else the first
    if found is None:
        raise BadParameter("jump", "the key has no versions")
    return found


@dataclass(frozen=True)
class Steps:
    back: datetime | None  # as of just before the last operation at or before now/as_of
    back_label: str
    forward: datetime | None  # as of just after the next operation after as_of
    forward_label: str


def _label(op: dict[str, Any]) -> str:
    return f"{op['type']} #{op['id']}"


def _between(cell: Cell, as_of: datetime) -> Q:
    """The operations of the key committed between the newest version created by ``as_of``
    and the first created after it (found on (cell, created_at)): the stretch of op_key_idx
    that holds the operations around ``as_of``, whatever the length of the history."""
    before = (Version.objects.filter(cell=cell, created_at__lte=as_of)
              .order_by("-created_at", "-id").values_list("created_by", flat=True).first())
    after = (Version.objects.filter(cell=cell, created_at__gt=as_of)
             .order_by("created_at", "id").values_list("created_by", flat=True).first())
    q = Q(namespace_id=cell.namespace_id, key=cell.key)
    if before:
        q &= Q(id__gte=before)
    if after:
        q &= Q(id__lte=after)
    return q


def _commit_of(newest: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Of the key's newest operations (newest first), the first of the newest commit:
    operations committed together (a revoke and the reinstatement it causes) are one step."""
    if not newest:
        return None
    at = newest[0]["created_at"]
    return min((o for o in newest if o["created_at"] == at), key=lambda o: o["id"])


def op_steps(*, cell: Cell, as_of: datetime | None) -> Steps:
    """The step back / forward of the as-of control: one commit of the key's operations at a
    time (support noops are not steps: they change no belief). Every statement is a LIMITed
    walk of op_key_idx between two of the key's versions, or an index probe."""
    ops: Any = Operation.objects.exclude(type=OpType.NOOP).values("id", "type", "created_at")
    mine = ops.filter(namespace_id=cell.namespace_id, key=cell.key)
    if as_of is None:
        last = _commit_of(list(mine.order_by("-id")[:STEP_WALK]))
        return Steps(last["created_at"] - TICK if last else None, _label(last) if last else "",
                     None, "")
    around = ops.filter(_between(cell, as_of))
    last = _commit_of(list(around.filter(created_at__lte=as_of).order_by("-id")[:STEP_WALK]))
    nxt = around.filter(created_at__gt=as_of).order_by("id").first()
    if nxt is None:  # past the last version's creation: the operations after it
        later = mine.filter(created_at__gt=as_of)
        nxt = (later if last is None else later.filter(id__gt=last["id"])).order_by("id").first()
    return Steps(last["created_at"] - TICK if last else None, _label(last) if last else "",
                 nxt["created_at"] if nxt else None, _label(nxt) if nxt else "")
