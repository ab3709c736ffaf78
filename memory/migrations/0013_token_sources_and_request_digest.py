"""Sources bound to tokens and idempotency conflicts (SPEC §8; docs/decisions.md).

1. ``ApiToken.sources``: the sources a write token may name beside those with no trust level.
   Existing tokens bind none: a write token made before keeps naming untrusted sources only,
   review tokens (every token made before scopes) name any, as before.
2. ``Evidence.request_digest``: the SHA-256 of what a keyed observation asked for. NULL on
   existing rows: their keys keep replaying whatever is sent with them.
3. The access audit log records binding and trust-level changes.
"""

from __future__ import annotations

import django.contrib.postgres.fields
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0012_evidence_lease'),
    ]

    operations = [
        migrations.AddField(
            model_name='apitoken',
            name='sources',
            field=django.contrib.postgres.fields.ArrayField(base_field=models.CharField(max_length=200), blank=True, default=list, size=None),
        ),
        migrations.AddField(
            model_name='evidence',
            name='request_digest',
            field=models.CharField(blank=True, max_length=64, null=True),
        ),
        migrations.AlterField(
            model_name='auditentry',
            name='action',
            field=models.CharField(choices=[('token_create', 'Token Create'), ('token_revoke', 'Token Revoke'), ('member_set', 'Member Set'), ('member_remove', 'Member Remove'), ('token_bind', 'Token Bind'), ('trust_set', 'Trust Set'), ('trust_clear', 'Trust Clear')], max_length=32),
        ),
    ]
