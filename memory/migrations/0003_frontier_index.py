"""The frontier index off the cell row, and no redundant indexes on the write path.

Every non-HOT update of a cell (each head move) inserted an entry into the HNSW index on
``memory_cell``: the dearest step of a commit. The index now lives on ``memory_frontiervector``,
a copy of each headed cell's embedding that commits invalidate (``vector_stale``) and a flush
re-inserts in bulk. Existing embeddings are copied before the index is built.

Foreign-key indexes that a composite index already covers are dropped (each was one more
btree insert per row written), among them ``memory_cell (namespace_id)``, which the planner
preferred to ``(namespace_id, key)`` on stale statistics and then scanned a whole namespace.
"""

import django.db.models.deletion
import pgvector.django.indexes
import pgvector.django.vector
from django.db import migrations, models

#: Foreign-key indexes a composite index already covers (name, table, column).
_REDUNDANT_INDEXES = (
    ("memory_cell_namespace_id_f4f9bfef", "memory_cell", "namespace_id"),
    ("memory_evidence_namespace_id_ede0984e", "memory_evidence", "namespace_id"),
    ("memory_operation_evidence_id_a82c533f", "memory_operation", "evidence_id"),
    ("memory_operation_namespace_id_475d7b70", "memory_operation", "namespace_id"),
    ("memory_supportedge_evidence_id_4b6837aa", "memory_supportedge", "evidence_id"),
    ("memory_version_cell_id_66f63164", "memory_version", "cell_id"),
    ("memory_version_namespace_id_b1dd7915", "memory_version", "namespace_id"),
)


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0002_drop_key_embedding_hnsw'),
    ]

    operations = [
        migrations.CreateModel(
            name='FrontierVector',
            fields=[
                ('cell', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='frontier_vector', serialize=False, to='memory.cell')),
                ('embedding', pgvector.django.vector.VectorField(dimensions=384)),
            ],
        ),
        migrations.RemoveIndex(
            model_name='cell',
            name='cell_embedding_hnsw',
        ),
        migrations.AddField(
            model_name='cell',
            name='vector_stale',
            field=models.BooleanField(default=False),
        ),
        # Django's AlterField(db_index=False) drops EVERY single-column btree index on the
        # column, the partial unique one_head_per_key included: drop the redundant foreign-key
        # indexes by name instead, and only record the field change in the migration state.
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='cell',
                    name='namespace',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='cells', to='memory.namespace'),
                ),
                migrations.AlterField(
                    model_name='evidence',
                    name='namespace',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='evidence', to='memory.namespace'),
                ),
                migrations.AlterField(
                    model_name='operation',
                    name='evidence',
                    field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='operations', to='memory.evidence'),
                ),
                migrations.AlterField(
                    model_name='operation',
                    name='namespace',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='operations', to='memory.namespace'),
                ),
                migrations.AlterField(
                    model_name='supportedge',
                    name='evidence',
                    field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='support_edges', to='memory.evidence'),
                ),
                migrations.AlterField(
                    model_name='version',
                    name='cell',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='versions', to='memory.cell'),
                ),
                migrations.AlterField(
                    model_name='version',
                    name='namespace',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='versions', to='memory.namespace'),
                ),
            ],
            database_operations=[
                migrations.RunSQL(f"DROP INDEX IF EXISTS {name}",
                                  reverse_sql=f"CREATE INDEX {name} ON {table} ({column})")
                for name, table, column in _REDUNDANT_INDEXES
            ],
        ),
        migrations.AddIndex(
            model_name='cell',
            index=models.Index(condition=models.Q(('vector_stale', True)), fields=['namespace'], name='cell_vector_stale_idx'),
        ),
        migrations.AddField(
            model_name='frontiervector',
            name='namespace',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='memory.namespace'),
        ),
        # The current embedding stays inline in the cell row (the key embedding, written
        # once, goes to TOAST first): reads scan the stale cells' vectors without detoasting.
        migrations.RunSQL(
            "ALTER TABLE memory_cell ALTER COLUMN embedding SET STORAGE MAIN",
            reverse_sql="ALTER TABLE memory_cell ALTER COLUMN embedding SET STORAGE EXTERNAL",
        ),
        migrations.RunSQL(
            "INSERT INTO memory_frontiervector (cell_id, namespace_id, embedding)"
            " SELECT id, namespace_id, embedding FROM memory_cell"
            " WHERE embedding IS NOT NULL AND head_id IS NOT NULL",
            reverse_sql=migrations.RunSQL.noop,
        ),
        migrations.AddIndex(
            model_name='frontiervector',
            index=pgvector.django.indexes.HnswIndex(ef_construction=64, fields=['embedding'], m=16, name='frontier_embedding_hnsw', opclasses=['vector_cosine_ops']),
        ),
    ]
