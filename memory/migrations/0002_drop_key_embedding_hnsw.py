"""Drop the HNSW index on ``Cell.key_embedding``.

Every non-HOT update of a cell row (a head move, an embedding refresh) inserted one entry into
each HNSW index on the table; two indexes doubled that, the most expensive part of a commit.
Soft identity, the only reader of ``key_embedding``, now scans the namespace's keys exactly.
"""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("memory", "0001_provenance_graph"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="cell", name="cell_key_embedding_hnsw"),
    ]
