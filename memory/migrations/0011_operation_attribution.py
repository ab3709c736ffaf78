"""Truthful attribution and restore (SPEC §1, §3; docs/decisions.md 60-61).

1. ``Operation.method`` (how it was decided: explicit, rule, model, identity, reinstate) and
   ``Operation.source`` (its evidence's source), and ``restore`` among the operation types.
2. ``Version.restores``: the revoked or contradicted version a ``restore`` brought back,
   indexed only where set.
3. ``op_closed_contest_idx``: the operations that closed a contest (``payload.closed_contest``,
   written from now on), for the review queue's "closed by later writes".
4. Backfill. Rows written before this migration named the method as the actor (``extractor``,
   ``annotator``) or a bare ``api``. Each such row now names who asked — the observation's
   recorder (``api:<token>``, ``mcp:<token>``, ``user:<name>``), else ``system`` — and the
   method it named moves to ``method``: ``extractor`` → rule, ``annotator`` → model, ``api`` →
   explicit; a fact that reached its key through soft identity (``payload.alias_of``) → identity;
   a rollback row → reinstate. People's and clients' rows (``user:…``, ``api:…``, ``mcp:…``)
   keep their actor and are explicit. ``source`` is copied from the evidence. One UPDATE.
"""

from __future__ import annotations

from django.db import migrations, models

BACKFILL = """
UPDATE memory_operation AS o SET
    method = CASE
        WHEN o.type = 'reinstate' THEN 'reinstate'
        WHEN o.actor IN ('extractor', 'annotator') AND o.payload ? 'alias_of' THEN 'identity'
        WHEN o.actor = 'extractor' THEN 'rule'
        WHEN o.actor = 'annotator' THEN 'model'
        ELSE 'explicit' END,
    actor = CASE
        WHEN o.actor IN ('extractor', 'annotator', 'api', '')
            THEN COALESCE(NULLIF(e.actor, ''), CASE WHEN o.actor = 'api' THEN 'api' ELSE 'system' END)
        ELSE o.actor END,
    source = COALESCE(e.source, '')
  FROM memory_operation AS o2 LEFT JOIN memory_evidence AS e ON e.id = o2.evidence_id
 WHERE o2.id = o.id
"""


class Migration(migrations.Migration):

    dependencies = [
        ("memory", "0010_long_histories"),
    ]

    operations = [
        migrations.AddField(
            model_name="operation",
            name="method",
            field=models.CharField(
                choices=[("explicit", "explicit"), ("rule", "rule"), ("model", "model"),
                         ("identity", "identity"), ("reinstate", "reinstate")],
                default="explicit", max_length=16),
        ),
        migrations.AddField(
            model_name="operation",
            name="source",
            field=models.CharField(blank=True, default="", max_length=200),
        ),
        migrations.AddField(
            model_name="version",
            name="restores",
            field=models.ForeignKey(blank=True, db_index=False, null=True,
                                    on_delete=models.deletion.PROTECT, related_name="restored_by",
                                    to="memory.version"),
        ),
        migrations.AddIndex(
            model_name="version",
            index=models.Index(condition=models.Q(("restores__isnull", False)),
                               fields=["restores"], name="version_restores_idx"),
        ),
        migrations.AlterField(
            model_name="operation",
            name="type",
            field=models.CharField(
                choices=[("accept", "Accept"), ("contest", "Contest"), ("reject", "Reject"),
                         ("revoke", "Revoke"), ("resolve", "Resolve"), ("noop", "Noop"),
                         ("restore", "Restore"), ("reinstate", "Reinstate")],
                max_length=16),
        ),
        migrations.AddIndex(
            model_name="operation",
            index=models.Index(condition=models.Q(("payload__has_key", "closed_contest")),
                               fields=["namespace", "-id"], name="op_closed_contest_idx"),
        ),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
    ]
