"""A btree on the frontier copy's namespace.

The HNSW index is shared by every namespace; without this, the planner's alternative for a
namespace holding few of the copies was a sequential scan of all of them (80 ms at 100k
copies), and a filtered HNSW walk can give up before it finds a small namespace's cells.
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0004_frontier_copy_without_fk'),
    ]

    operations = [
        migrations.AddIndex(
            model_name='frontiervector',
            index=models.Index(fields=['namespace'], name='frontier_namespace_idx'),
        ),
    ]
