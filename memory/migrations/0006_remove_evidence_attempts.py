"""Drop ``Evidence.attempts``: nothing ever wrote or read it (task retries are Celery's)."""

from __future__ import annotations

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("memory", "0005_frontier_namespace_index")]

    operations = [migrations.RemoveField(model_name="evidence", name="attempts")]
