from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("memory", "0017_evidence_extract_text"),
    ]

    operations = [
        migrations.AddField(
            model_name="evidence",
            name="messages",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
