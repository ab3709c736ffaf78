"""Long histories and time travel (SPEC §9, §10).

Adds what bounded reads and exact "as of" reads need, and backfills it:

- ``Version.ordinal``: the 1-based position of a version in its key's history (commit order,
  which is id order within a key: the cell is locked while versions are inserted), unique per
  key; ``Cell.version_count``: how many versions the key holds. Pages and windows are keysets
  on (cell, ordinal); their totals come from the counter, never from counting rows.
- ``VersionSpan``: per version, the stretches of commit time during which it had one status.
  Backfilled from the effects each operation logged (``payload.effects``, stored ids), in
  commit order. A version whose logged effects do not end in its present status (rows written
  before effects were logged) gets one span from its creation with its present status: exact
  for the present, and for the past as far as the log allows.
The history's value search needs no new index: it reads ``version_value_tsv`` (migration 0008,
the folded value's lexemes and the namespace's; ``pg_trgm`` is not in the embedded
PostgreSQL).
"""

from __future__ import annotations

import django.db.models.deletion
from django.db import migrations, models

_ORDINALS = """
UPDATE memory_version v SET ordinal = o.n
  FROM (SELECT id, row_number() OVER (PARTITION BY cell_id ORDER BY id) AS n
          FROM memory_version) o
 WHERE v.id = o.id;
UPDATE memory_cell c SET version_count = n.n
  FROM (SELECT cell_id, count(*) AS n FROM memory_version GROUP BY cell_id) n
 WHERE c.id = n.cell_id;
"""

# Every status a version took, with the commit time: its creation (the NewVersion effect of the
# operation that created it) and each Retype / Reinstate an operation logged. The spans follow
# in commit order; a version whose events are missing or do not end in its present status gets
# one span with its present status instead.
_SPANS = """
WITH created AS (
    SELECT v.id AS version_id, v.cell_id, e.value->>'status' AS status, o.created_at AS at,
           o.id AS op, 0::bigint AS ord
      FROM memory_version v
      JOIN memory_operation o ON o.id = v.created_by_id,
           LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(o.payload->'effects') = 'array'
                                             THEN o.payload->'effects' ELSE '[]' END) e
     WHERE e.value->>'effect' = 'NewVersion'
), retyped AS (
    SELECT v.id AS version_id, v.cell_id, e.value->>'status' AS status, o.created_at AS at,
           o.id AS op, e.ordinality AS ord
      FROM memory_operation o,
           LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(o.payload->'effects') = 'array'
                                             THEN o.payload->'effects' ELSE '[]' END)
               WITH ORDINALITY e
      JOIN memory_version v ON v.id = (e.value->>'version_id')::bigint
     WHERE e.value->>'effect' IN ('Retype', 'Reinstate')
       AND jsonb_typeof(e.value->'version_id') = 'number'
), events AS (
    SELECT *, row_number() OVER w AS n, count(*) OVER (PARTITION BY version_id) AS total,
           lead(at) OVER w AS next_at,
           last_value(status) OVER (PARTITION BY version_id ORDER BY at, op, ord
                                    ROWS BETWEEN UNBOUNDED PRECEDING
                                         AND UNBOUNDED FOLLOWING) AS final
      FROM (SELECT * FROM created UNION ALL SELECT * FROM retyped) x
    WINDOW w AS (PARTITION BY version_id ORDER BY at, op, ord)
), exact AS (
    SELECT e.* FROM events e JOIN memory_version v ON v.id = e.version_id
     WHERE e.final = v.status
       AND EXISTS (SELECT 1 FROM created c WHERE c.version_id = e.version_id)
)
INSERT INTO memory_versionspan (cell_id, version_id, status, since, until)
SELECT cell_id, version_id, status, at, next_at FROM exact
 WHERE next_at IS NULL OR next_at > at
UNION ALL
SELECT v.cell_id, v.id, v.status, v.created_at, NULL FROM memory_version v
 WHERE NOT EXISTS (SELECT 1 FROM exact x WHERE x.version_id = v.id);
"""


class Migration(migrations.Migration):
    dependencies = [("memory", "0009_keys_every_script")]

    operations = [
        migrations.AddField(
            model_name="cell", name="version_count",
            field=models.IntegerField(db_default=0, default=0)),
        migrations.AddField(
            model_name="version", name="ordinal", field=models.IntegerField(null=True)),
        migrations.CreateModel(
            name="VersionSpan",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                           verbose_name="ID")),
                ("status", models.CharField(max_length=16, choices=[
                    ("active", "active"), ("contested", "contested"),
                    ("alternative", "alternative"), ("superseded", "superseded"),
                    ("contradicted", "contradicted"), ("revoked", "revoked")])),
                ("since", models.DateTimeField()),
                ("until", models.DateTimeField(blank=True, null=True)),
                ("cell", models.ForeignKey(db_index=False,
                                           on_delete=django.db.models.deletion.CASCADE,
                                           related_name="+", to="memory.cell")),
                ("version", models.ForeignKey(db_index=False,
                                              on_delete=django.db.models.deletion.CASCADE,
                                              related_name="spans", to="memory.version")),
            ],
        ),
        migrations.RunSQL(_ORDINALS, migrations.RunSQL.noop),
        migrations.RunSQL(_SPANS, migrations.RunSQL.noop),
        migrations.AlterField(model_name="version", name="ordinal",
                              field=models.IntegerField()),
        migrations.AddConstraint(
            model_name="version",
            constraint=models.UniqueConstraint(fields=("cell", "ordinal"),
                                               name="version_ordinal_unique")),
        migrations.AddIndex(
            model_name="version",
            index=models.Index(fields=["cell", "created_at"], name="version_cell_created_idx")),
        migrations.AddIndex(
            model_name="versionspan",
            index=models.Index(fields=["version", "since"], name="span_version_idx")),
        migrations.AddIndex(
            model_name="versionspan",
            index=models.Index(condition=models.Q(status__in=["active", "contested"]),
                               fields=["cell", "since"], name="span_head_idx")),
        migrations.AddIndex(
            model_name="versionspan",
            index=models.Index(condition=models.Q(status="alternative"),
                               fields=["cell", "since"], name="span_alternative_idx")),
        migrations.AddIndex(
            model_name="versionspan",
            index=models.Index(fields=["cell", "since"], name="span_cell_idx")),
    ]
