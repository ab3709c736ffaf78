from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("memory", "0016_operation_method_client"),
    ]

    operations = [
        migrations.AddField(
            model_name="evidence",
            name="messages",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
