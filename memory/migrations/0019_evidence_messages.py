from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("memory", "0018_erase_audit_key_digest"),
    ]

    operations = [
        migrations.AddField(
            model_name="evidence",
            name="messages",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
