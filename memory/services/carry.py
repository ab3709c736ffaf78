"""What a value brought back by an undo keeps of the version it brings back.

``restore`` carries the restored version's evidence and metadata in the writer itself (SPEC §3,
§11.4). Undoing a resolution contests again with each value it contradicted (SPEC §3); each
alternative that contest makes is that value back in the contest, so it carries the contradicted
version's evidence (``supported_by`` edges to the same observations, its support growing by as
many) and its metadata, exactly as a restore carries x's — never "no observation behind it"."""

from __future__ import annotations

from collections.abc import Sequence

from .binding import bound_cursor

_CARRY_SQL = """
WITH pairs AS (
    SELECT * FROM unnest(%b::bigint[], %b::bigint[], %b::bigint[])
        AS p(version_id, original_id, operation_id)
), carried AS (
    INSERT INTO memory_supportedge (version_id, evidence_id, operation_id)
    SELECT DISTINCT p.version_id, e.evidence_id, p.operation_id
      FROM pairs AS p
      JOIN memory_supportedge AS e ON e.version_id = p.original_id AND e.evidence_id IS NOT NULL
     WHERE NOT EXISTS (SELECT 1 FROM memory_supportedge AS s
                        WHERE s.version_id = p.version_id AND s.evidence_id = e.evidence_id)
    RETURNING version_id
), counts AS (
    SELECT version_id, count(*) AS n FROM carried GROUP BY version_id
)
-- One UPDATE per row (a row updated twice in one statement keeps only one of the changes).
UPDATE memory_version AS v
   SET support = v.support + COALESCE(c.n, 0), metadata = COALESCE(v.metadata, o.metadata)
  FROM pairs AS p JOIN memory_version AS o ON o.id = p.original_id
       LEFT JOIN counts AS c ON c.version_id = p.version_id
 WHERE v.id = p.version_id
"""


def carry_evidence(pairs: Sequence[tuple[int, int, int]]) -> None:
    """``(new version, original version, operation)`` each: the new version gets ``supported_by``
    edges to the original's evidence (one per distinct evidence it lacks, signed by the
    operation) and, when it has none of its own, the original's metadata. ONE statement."""
    if not pairs:
        return
    with bound_cursor() as cur:
        cur.execute(_CARRY_SQL, [[p[0] for p in pairs], [p[1] for p in pairs],
                                 [p[2] for p in pairs]])
