"""API tokens stored only as a hash; scopes, expiry, last use, revocation; the access audit log.

Existing tokens keep working: their secret is hashed into ``digest`` (plain SHA-256 of the
UTF-8 text, as ``memory.services.tokens.token_digest`` computes it), its first 8 characters
kept as the visible ``prefix``, then the clear ``key`` column is dropped. They get scope
``review``: they could do everything in their namespace before scopes existed, and still can.

Irreversible: a hash cannot be turned back into the token.
"""

import hashlib

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

LEGACY_PREFIX_CHARS = 8


def hash_existing_tokens(apps, schema_editor):
    ApiToken = apps.get_model("memory", "ApiToken")
    for pk, key in ApiToken.objects.values_list("pk", "key").iterator():
        # update() by pk writes these two columns only (no save() of every field).
        ApiToken.objects.filter(pk=pk).update(
            digest=hashlib.sha256(key.encode("utf-8")).hexdigest(),
            prefix=key[:LEGACY_PREFIX_CHARS],
        )


class Migration(migrations.Migration):

    dependencies = [
        ("memory", "0006_remove_evidence_attempts"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="apitoken",
            name="digest",
            field=models.CharField(max_length=64, null=True),
        ),
        migrations.AddField(
            model_name="apitoken",
            name="prefix",
            field=models.CharField(default="", max_length=16),
        ),
        migrations.AddField(
            model_name="apitoken",
            name="name",
            field=models.CharField(blank=True, default="", max_length=100),
        ),
        migrations.AddField(
            model_name="apitoken",
            name="scope",
            field=models.CharField(choices=[("read", "read"), ("write", "write"),
                                            ("review", "review")],
                                   default="review", max_length=8),
        ),
        migrations.AddField(
            model_name="apitoken",
            name="created_by",
            field=models.ForeignKey(blank=True, null=True,
                                    on_delete=django.db.models.deletion.SET_NULL,
                                    related_name="+", to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name="apitoken",
            name="expires_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="apitoken",
            name="last_used_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="apitoken",
            name="revoked_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="apitoken",
            name="revoked_by",
            field=models.CharField(blank=True, default="", max_length=200),
        ),
        migrations.RunPython(hash_existing_tokens, reverse_code=None, elidable=False),
        migrations.RemoveField(
            model_name="apitoken",
            name="key",
        ),
        migrations.AlterField(
            model_name="apitoken",
            name="digest",
            field=models.CharField(max_length=64, unique=True),
        ),
        migrations.AlterField(
            model_name="apitoken",
            name="prefix",
            field=models.CharField(max_length=16),
        ),
        migrations.AlterField(
            model_name="membership",
            name="role",
            field=models.CharField(choices=[("viewer", "Viewer"), ("reviewer", "Reviewer"),
                                            ("admin", "Admin")],
                                   default="viewer", max_length=16),
        ),
        migrations.CreateModel(
            name="AuditEntry",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                           verbose_name="ID")),
                ("actor", models.CharField(max_length=200)),
                ("action", models.CharField(choices=[("token_create", "Token Create"),
                                                     ("token_revoke", "Token Revoke"),
                                                     ("member_set", "Member Set"),
                                                     ("member_remove", "Member Remove")],
                                            max_length=32)),
                ("target", models.CharField(max_length=200)),
                ("detail", models.JSONField(blank=True, default=dict)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("namespace", models.ForeignKey(on_delete=django.db.models.deletion.PROTECT,
                                                related_name="audit", to="memory.namespace")),
            ],
            options={
                "indexes": [models.Index(fields=["namespace", "-id"],
                                         name="audit_namespace_idx")],
            },
        ),
    ]
