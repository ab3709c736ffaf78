"""Long histories written straight into the tables (SPEC §10): one key with N versions, or N
keys, in a handful of set-based statements, shaped exactly as the commit writes them (ordinals,
counters, status spans, one accept per version with its observation and support edge).

The benchmark ``pmem_bench history`` and the structural tests build their 100,000-version keys
with these: through the API it would take hours, and what is measured is the reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from memory.models import Cell, Namespace

_SEED_KEY_SQL = """
CREATE TEMP TABLE seed ON COMMIT DROP AS
SELECT i, nextval('memory_operation_id_seq') AS op_id, nextval('memory_version_id_seq') AS v_id,
       nextval('memory_evidence_id_seq') AS e_id, %(t0)s::timestamptz + (i * %(step)s) AS at
  FROM generate_series(1, %(n)s) AS i ORDER BY i;
INSERT INTO memory_evidence (id, namespace_id, seq, text, source, received_at, actor, state,
                             error, committed_at, chat_calls, embed_calls, prompt_tokens,
                             completion_tokens)
SELECT e_id, %(ns)s, %(seq0)s + i, %(key)s || ' = position ' || i, 'seed', at, 'system:seed',
       'committed', '', at, 0, 0, 0, 0 FROM seed;
INSERT INTO memory_operation (id, namespace_id, cell_id, key, type, requested, actor,
                              evidence_id, seq, version_id, value, payload, reason, raw_output,
                              prompt_tokens, completion_tokens, created_at, method, source)
SELECT op_id, %(ns)s, %(cell)s, %(key)s, 'accept', 'accept', 'system:seed', e_id,
       %(seq0)s + i, v_id, 'position ' || i, '{}'::jsonb, '', '', 0, 0, at, 'explicit', 'seed'
  FROM seed;
INSERT INTO memory_version (id, namespace_id, cell_id, value, status, valid_from, valid_to,
                            support, created_by_id, supersedes_id, alternative_of_id,
                            created_at, ordinal)
SELECT v_id, %(ns)s, %(cell)s, 'position ' || i,
       CASE WHEN i = %(n)s THEN 'active' ELSE 'superseded' END, at, lead(at) OVER w, 1, op_id,
       lag(v_id) OVER w, NULL, at, %(base)s + i FROM seed WINDOW w AS (ORDER BY i);
INSERT INTO memory_versionspan (cell_id, version_id, status, since, until)
SELECT %(cell)s, v_id, status, since, until FROM (
    SELECT v_id, i, 'active' AS status, at AS since, lead(at) OVER (ORDER BY i) AS until
      FROM seed
    UNION ALL
    SELECT v_id, i, 'superseded', nxt, NULL
      FROM (SELECT v_id, i, lead(at) OVER (ORDER BY i) AS nxt FROM seed) AS x
     WHERE nxt IS NOT NULL) AS spans
 ORDER BY i, since;
INSERT INTO memory_supportedge (version_id, evidence_id, operation_id)
SELECT v_id, e_id, op_id FROM seed;
UPDATE memory_cell SET head_id = (SELECT v_id FROM seed WHERE i = %(n)s),
       version_count = %(base)s + %(n)s, updated_at = %(t_end)s WHERE id = %(cell)s;
UPDATE memory_namespace SET next_seq = %(seq0)s + %(n)s + 1 WHERE id = %(ns)s;
DROP TABLE seed;
"""


@contextmanager
def without_fk_triggers(cur: Any) -> Iterator[None]:
    """The rows written here are consistent by construction: skip the row-by-row foreign-key
    checks when the role may (a million deferred checks take minutes at commit), as the erase
    does."""
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


def seed_key(namespace: Namespace, key: str, versions: int, *, start: datetime | None = None,
             step: timedelta = timedelta(seconds=60)) -> Cell:
    """A new key ``key`` whose value was accepted ``versions`` times, one observation each,
    ``step`` apart from ``start`` (default: ending a step before now): ``position 1`` …
    ``position N``, the last one the head. Returns the cell (head loaded)."""
    now = timezone.now()
    start = start or now - step * (versions + 1)
    with transaction.atomic():
        cell = Cell.objects.create(namespace=namespace, key=key)
        ns = Namespace.objects.select_for_update().get(pk=namespace.pk)
        with connection.cursor() as cur, without_fk_triggers(cur):
            cur.execute(_SEED_KEY_SQL, {
                "t0": start, "step": step, "n": versions, "ns": namespace.pk, "cell": cell.pk,
                "key": key, "seq0": ns.next_seq - 1, "base": 0,
                "t_end": start + step * versions})
    return Cell.objects.select_related("head").get(pk=cell.pk)


_SEED_CELLS_SQL = """
CREATE TEMP TABLE seedc ON COMMIT DROP AS
SELECT i, %(prefix)s || lpad(i::text, 7, '0') AS key, nextval('memory_cell_id_seq') AS c_id,
       nextval('memory_version_id_seq') AS v1, nextval('memory_version_id_seq') AS v2,
       nextval('memory_operation_id_seq') AS o1, nextval('memory_operation_id_seq') AS o2,
       %(t0)s::timestamptz + (i * %(step)s) AS at1,
       %(t0)s::timestamptz + ((%(n)s + i) * %(step)s) AS at2
  FROM generate_series(1, %(n)s) AS i ORDER BY i;
INSERT INTO memory_cell (id, namespace_id, key, created_at, updated_at, embedded_text,
                         vector_stale, version_count)
SELECT c_id, %(ns)s, key, at1, at2, '', false, 2 FROM seedc;
INSERT INTO memory_operation (id, namespace_id, cell_id, key, type, requested, actor, value,
                              payload, reason, raw_output, prompt_tokens, completion_tokens,
                              created_at, method, source)
SELECT o1, %(ns)s, c_id, key, 'accept', 'accept', 'system:seed', 'first ' || i, '{}'::jsonb,
       '', '', 0, 0, at1, 'explicit', '' FROM seedc
UNION ALL
SELECT o2, %(ns)s, c_id, key, 'accept', 'accept', 'system:seed', 'second ' || i, '{}'::jsonb,
       '', '', 0, 0, at2, 'explicit', '' FROM seedc;
INSERT INTO memory_version (id, namespace_id, cell_id, value, status, valid_from, valid_to,
                            support, created_by_id, supersedes_id, created_at, ordinal)
SELECT v1, %(ns)s, c_id, 'first ' || i, 'superseded', at1, at2, 1, o1, NULL, at1, 1 FROM seedc
UNION ALL
SELECT v2, %(ns)s, c_id, 'second ' || i, 'active', at2, NULL, 1, o2, v1, at2, 2 FROM seedc;
INSERT INTO memory_versionspan (cell_id, version_id, status, since, until)
SELECT c_id, v1, 'active', at1, at2 FROM seedc
UNION ALL SELECT c_id, v1, 'superseded', at2, NULL FROM seedc
UNION ALL SELECT c_id, v2, 'active', at2, NULL FROM seedc;
INSERT INTO memory_supportedge (version_id, operation_id)
SELECT v1, o1 FROM seedc UNION ALL SELECT v2, o2 FROM seedc;
UPDATE memory_cell c SET head_id = s.v2 FROM seedc s WHERE c.id = s.c_id;
DROP TABLE seedc;
"""


def seed_cells(namespace: Namespace, cells: int, *, prefix: str = "key_",
               start: datetime | None = None, step: timedelta = timedelta(seconds=1)
               ) -> tuple[datetime, datetime]:
    """``cells`` keys, each accepted twice (``first i`` at ``start + i·step``, then ``second
    i`` after every key had its first value). Returns the moment after all first values and
    before any second one, and the moment after everything."""
    now = timezone.now()
    start = start or now - step * (2 * cells + 2)
    with transaction.atomic(), connection.cursor() as cur, without_fk_triggers(cur):
        cur.execute(_SEED_CELLS_SQL, {"t0": start, "step": step, "n": cells, "ns": namespace.pk,
                                      "prefix": prefix})
    return start + step * cells + step / 2, start + step * (2 * cells + 1)
