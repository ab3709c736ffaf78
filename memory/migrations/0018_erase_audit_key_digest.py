"""An erase's audit keeps a digest of the key, never its name (SPEC §6): rows written before
hold the name; replace it with the digest."""

import hashlib

from django.db import migrations


def digest_keys(apps, schema_editor):
    EraseAudit = apps.get_model("memory", "EraseAudit")
    for audit in EraseAudit.objects.exclude(key__startswith="sha256:").only("id", "key"):
        audit.key = "sha256:" + hashlib.sha256(audit.key.encode()).hexdigest()
        audit.save(update_fields=["key"])


class Migration(migrations.Migration):
    dependencies = [("memory", "0017_evidence_extract_text")]

    operations = [migrations.RunPython(digest_keys, migrations.RunPython.noop)]
