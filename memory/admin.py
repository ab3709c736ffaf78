"""Read-only admin for every model: the graph is append-only, writes go through services."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from memory import models


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(models.Namespace)
class NamespaceAdmin(ReadOnlyAdmin):
    list_display = ("name", "next_seq", "created_at")


@admin.register(models.Evidence)
class EvidenceAdmin(ReadOnlyAdmin):
    list_display = ("namespace", "seq", "state", "source", "received_at")
    list_filter = ("state", "namespace")
    exclude = ("embedding",)


@admin.register(models.Cell)
class CellAdmin(ReadOnlyAdmin):
    list_display = ("namespace", "key", "head", "updated_at")
    search_fields = ("key",)
    exclude = ("embedding", "key_embedding")


@admin.register(models.Version)
class VersionAdmin(ReadOnlyAdmin):
    list_display = ("cell", "value", "status", "support", "valid_from", "valid_to")
    list_filter = ("status",)


@admin.register(models.Operation)
class OperationAdmin(ReadOnlyAdmin):
    list_display = ("namespace", "key", "type", "requested", "actor", "seq", "created_at")
    list_filter = ("type", "namespace")


@admin.register(models.ApiToken)
class ApiTokenAdmin(ReadOnlyAdmin):
    """Tokens are made and revoked with ``pmem_token`` or in the explorer (where the secret is
    shown once); the admin only lists them. ``digest`` is left out: it is no one's business."""

    list_display = ("prefix", "name", "namespace", "scope", "created_at", "expires_at",
                    "last_used_at", "revoked_at")
    list_filter = ("scope", "namespace")
    exclude = ("digest",)


@admin.register(models.AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "namespace", "actor", "action", "target")
    list_filter = ("action", "namespace")


for model in (models.KeyAlias, models.SupportEdge, models.Tombstone, models.EraseAudit,
              models.Membership, models.SourceTrust):
    admin.site.register(model, ReadOnlyAdmin)
