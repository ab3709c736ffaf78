"""Application tokens and facts' metadata (CONTRACT "One application credential, many users'
memories"; docs/decisions.md).

1. ``ApiToken.namespace_prefix``: an application token reaches every namespace whose name
   starts with it; its ``namespace`` is then empty (a check constraint: one or the other).
   Existing tokens keep their namespace and an empty prefix.
2. ``AuditEntry.namespace`` may be empty: the rows of an application token, which belongs to
   no single namespace.
3. ``Version.metadata``: the flat object a fact carried, kept with the version it created.
   ``pmem_ns_metadata(namespace, metadata)`` adds the namespace to it under the key ``""``
   (a key metadata may not have), and ``version_head_metadata_idx`` indexes that for the heads
   that have metadata only: a filter's entries and the namespace are looked up together in
   one GIN index (jsonb_path_ops), so a filtered read costs what its matches cost, never a
   walk of the namespace or of a key's history.
"""

from __future__ import annotations

import django.db.models.deletion
from django.db import migrations, models

# Text in, text out: immutable whatever the settings (jsonb_build_object is only stable).
FUNCTION = """
CREATE FUNCTION pmem_ns_metadata(ns bigint, m jsonb) RETURNS jsonb
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT m || ('{"": ' || ns::text || '}')::jsonb $$
"""
COMMENT = ("COMMENT ON FUNCTION pmem_ns_metadata(bigint, jsonb) IS 'P-Mem: a version''s metadata"
           " with its namespace (key \"\"), as the metadata filter''s index holds it'")
DROP_FUNCTION = "DROP FUNCTION IF EXISTS pmem_ns_metadata(bigint, jsonb)"
INDEX = ("CREATE INDEX CONCURRENTLY IF NOT EXISTS version_head_metadata_idx ON memory_version"
         " USING gin (pmem_ns_metadata(namespace_id, metadata) jsonb_path_ops)"
         " WITH (gin_pending_list_limit = 64)"
         " WHERE metadata IS NOT NULL AND status IN ('active', 'contested')")
DROP_INDEX = "DROP INDEX CONCURRENTLY IF EXISTS version_head_metadata_idx"


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ('memory', '0014_recall_terms_and_embedders'),
    ]

    operations = [
        migrations.AddField(
            model_name='apitoken',
            name='namespace_prefix',
            field=models.CharField(blank=True, default='', max_length=100),
        ),
        migrations.AlterField(
            model_name='apitoken',
            name='namespace',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='tokens', to='memory.namespace'),
        ),
        migrations.AddConstraint(
            model_name='apitoken',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('namespace__isnull', False), ('namespace_prefix', '')), models.Q(('namespace__isnull', True), models.Q(('namespace_prefix', ''), _negated=True)), _connector='OR'), name='token_namespace_or_prefix'),
        ),
        migrations.AlterField(
            model_name='auditentry',
            name='namespace',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='audit', to='memory.namespace'),
        ),
        migrations.AddField(
            model_name='version',
            name='metadata',
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.RunSQL([FUNCTION, COMMENT], DROP_FUNCTION),
        migrations.RunSQL(INDEX, DROP_INDEX),
    ]
