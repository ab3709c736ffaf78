"""Recall: the lexical terms of each cell (the hybrid frontier read), the cells a deferred
embedder still has to embed, and the embedder each namespace's vectors came from.

Existing namespaces get no embedder (empty: unknown): the migration cannot tell which embedder
made their vectors, so reads refuse them until ``manage.py pmem_reembed`` has re-embedded them
(which also writes their cells' terms); ``make run`` does that at start (docs/decisions.md).
"""

import django.contrib.postgres.fields
import django.contrib.postgres.indexes
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0013_token_sources_and_request_digest'),
    ]

    operations = [
        migrations.AddField(
            model_name='cell',
            name='embed_pending',
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AddField(
            model_name='cell',
            name='terms',
            field=django.contrib.postgres.fields.ArrayField(base_field=models.TextField(), blank=True, null=True, size=None),
        ),
        migrations.AddField(
            model_name='namespace',
            name='embedder',
            field=models.CharField(blank=True, db_default='', default='', max_length=200),
        ),
        migrations.AddField(
            model_name='namespace',
            name='reembed',
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name='cell',
            index=models.Index(condition=models.Q(('embed_pending', True)), fields=['namespace'], name='cell_embed_pending_idx'),
        ),
        migrations.AddIndex(
            model_name='cell',
            index=django.contrib.postgres.indexes.GinIndex(fields=['terms'], gin_pending_list_limit=64, name='cell_terms_gin'),
        ),
    ]
