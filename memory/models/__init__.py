"""The provenance graph in PostgreSQL (SPEC §1).

Nodes: Namespace, Evidence, Cell (key), Version, Operation, Tombstone. Typed edges:
``Version.supersedes`` (supersedes), ``Version.alternative_of`` (alternative_of),
``SupportEdge`` (supported_by), ``Tombstone.version`` (revokes). Writes go through
``memory.services``; these classes hold fields, constraints and indexes only.

One app's tables, in three modules by what they hold: the graph (``graph``), who may reach
it and what remains of what was removed (``access``), and the change feed with its webhooks
(``changes``). Every model is importable from here,
as Django's migrations see them.
"""

from .access import (
    ApiToken,
    AuditEntry,
    EraseAudit,
    Membership,
    Namespace,
    NamespaceDeletion,
    SourceTrust,
    new_token,
)
from .changes import ChangeCounter, ChangeEvent, WebhookDelivery, WebhookEndpoint
from .graph import (
    EMBED_DIM,
    HEAD_Q,
    Cell,
    Evidence,
    FrontierVector,
    KeyAlias,
    Operation,
    SupportEdge,
    Tombstone,
    Version,
    VersionSpan,
)

#: The old column default of ApiToken.key, by the name migration 0001 gives it.
_new_token = new_token

__all__ = [
    "EMBED_DIM", "HEAD_Q", "ApiToken", "AuditEntry", "Cell", "ChangeCounter", "ChangeEvent",
    "EraseAudit", "Evidence", "FrontierVector", "KeyAlias", "Membership", "Namespace",
    "NamespaceDeletion", "Operation", "SourceTrust", "SupportEdge", "Tombstone", "Version",
    "VersionSpan", "WebhookDelivery", "WebhookEndpoint", "new_token",
]
