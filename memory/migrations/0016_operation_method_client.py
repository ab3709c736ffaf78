"""Operation.method takes ``client``: a client's structured fact decided without the model
(SPEC §3, §5.4). Only the field's choices change; no row is rewritten."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("memory", "0015_application_tokens_and_metadata"),
    ]

    operations = [
        migrations.AlterField(
            model_name="operation",
            name="method",
            field=models.CharField(
                choices=[("explicit", "explicit"), ("client", "client"), ("rule", "rule"),
                         ("model", "model"), ("identity", "identity"),
                         ("reinstate", "reinstate")],
                default="explicit", max_length=16),
        ),
    ]
