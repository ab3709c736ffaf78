"""Evidence.extract_text: a client that sent facts asked for its text to be extracted too
(SPEC §5.2). A column with a database default: existing rows are not rewritten."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("memory", "0016_operation_method_client"),
    ]

    operations = [
        migrations.AddField(
            model_name="evidence",
            name="extract_text",
            field=models.BooleanField(db_default=False, default=False),
        ),
    ]
