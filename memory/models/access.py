"""Who may reach a namespace, and what remains of what was removed from it: namespaces,
members, tokens, sources' trust, the access audit, and the records an erase or a namespace's
deletion leaves (no content)."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q

from memory.domain import vocabulary
from memory.domain.scopes import LEGACY_SCOPE, Scope


class Namespace(models.Model):
    """One agent's (or user's) memory. ``next_seq`` hands out evidence ``seq`` under a row lock."""

    name = models.SlugField(max_length=100, unique=True)
    next_seq = models.BigIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    # The embedder (name/dimension, memory.llm.embedding.embedder_id) that made the namespace's
    # vectors; empty when unknown (a namespace older than the record). A read whose embedder is
    # another refuses until ``pmem_reembed`` has re-embedded it: two embedders' vectors are
    # never compared.
    embedder = models.CharField(max_length=200, blank=True, default="", db_default="")
    # A re-embedding under way: {"embedder", "stage", "after"} (resumed where it stopped).
    reembed = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    """A person's role in a namespace for the explorer: a viewer sees, a reviewer may act,
    an admin also manages members and API tokens."""

    class Role(models.TextChoices):
        VIEWER = vocabulary.Role.VIEWER.value
        REVIEWER = vocabulary.Role.REVIEWER.value
        ADMIN = vocabulary.Role.ADMIN.value

    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, related_name="members")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="pmem_memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["namespace", "user"], name="membership_once")]


def new_token() -> str:
    """The old column default, referenced by migration 0001; tokens are made by
    ``memory.services.tokens`` now and stored only as a digest."""
    return secrets.token_hex(20)


class ApiToken(models.Model):
    """An API token: reaches exactly one namespace, or — an application token — every
    namespace whose name starts with ``namespace_prefix`` (and creates one on its first write
    there), within its scope.

    The secret itself is never stored: ``digest`` is its SHA-256 (a long random secret needs
    no slow password hash, see docs/decisions.md), ``prefix`` its first characters, shown to
    tell tokens apart. ``key`` holds the secret only on the instance ``token_create`` returns.
    """

    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, related_name="tokens",
                                  null=True, blank=True)
    # An application token's reach (namespace is then empty); "" for a namespace's token.
    namespace_prefix = models.CharField(max_length=100, blank=True, default="")
    digest = models.CharField(max_length=64, unique=True)  # hex SHA-256 of the secret
    prefix = models.CharField(max_length=16)
    name = models.CharField(max_length=100, blank=True, default="")
    client = models.CharField(max_length=100, default="client")  # signs operations: api:<client>
    scope = models.CharField(max_length=8, choices=[(s.value, s.value) for s in Scope],
                             default=LEGACY_SCOPE.value)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    # Written at most once a minute per token (memory.services.tokens), not once a request.
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.CharField(max_length=200, blank=True, default="")
    # The sources a write token may name beside those with no trust level (SPEC §8,
    # memory.domain.scopes.source_refusal); empty: only those.
    sources = ArrayField(models.CharField(max_length=200), default=list, blank=True)

    #: The secret, on the instance ``token_create`` returns only; never saved.
    key: str | None = None

    class Meta:
        constraints = [
            # One namespace, or a prefix: never both, never neither.
            models.CheckConstraint(
                condition=(Q(namespace__isnull=False, namespace_prefix="")
                           | (Q(namespace__isnull=True) & ~Q(namespace_prefix=""))),
                name="token_namespace_or_prefix"),
        ]

    @property
    def namespace_name(self) -> str | None:
        """The one namespace it reaches; None for an application token."""
        return self.namespace.name if self.namespace is not None else None

    @property
    def application_prefix(self) -> str | None:
        """An application token's prefix; None for a token of one namespace."""
        return self.namespace_prefix or None

    def __str__(self) -> str:
        reach = self.namespace_id if self.namespace_id is not None else f"{self.namespace_prefix}*"
        return f"{self.prefix}… ({self.name or self.client}@{reach})"


class SourceTrust(models.Model):
    """Trust level of an evidence source in a namespace (SPEC §8). Unlisted sources: 0."""

    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, related_name="trust")
    source = models.CharField(max_length=200)
    level = models.IntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["namespace", "source"], name="trust_once")]




class EraseAudit(models.Model):
    """What remains of a privacy erase (SPEC §6): who, when, which key — no content."""

    namespace = models.ForeignKey(Namespace, on_delete=models.PROTECT, related_name="erasures")
    key = models.CharField(max_length=255)
    actor = models.CharField(max_length=200)
    versions_erased = models.IntegerField(default=0)
    evidence_redacted = models.IntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    # When the VACUUM the erase scheduled (dead tuples still hold the values) has run.
    vacuumed_at = models.DateTimeField(null=True, blank=True)


class NamespaceDeletion(models.Model):
    """What remains of a deleted namespace (SPEC §13): who, when, a digest of its name and
    counts — no foreign key, the namespace is gone and its name may be used again."""

    name_digest = models.CharField(max_length=64)  # hex SHA-256 of the name
    actor = models.CharField(max_length=200)
    counts = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)
    # When the deletion finished (a large namespace is deleted batch by batch).
    finished_at = models.DateTimeField(null=True, blank=True)
    # When the VACUUM that removes the dead tuples (still holding the content) has run.
    vacuumed_at = models.DateTimeField(null=True, blank=True)


class AuditEntry(models.Model):
    """A change to who may reach a namespace, kept beside the operation log: tokens made,
    revoked and bound to sources, members added, re-roled and removed, sources' trust levels
    set and cleared (trust decides whose word wins, SPEC §8). Never the secret, never changed."""

    class Action(models.TextChoices):
        TOKEN_CREATE = "token_create"
        TOKEN_REVOKE = "token_revoke"
        MEMBER_SET = "member_set"
        MEMBER_REMOVE = "member_remove"
        TOKEN_BIND = "token_bind"
        TRUST_SET = "trust_set"
        TRUST_CLEAR = "trust_clear"
        WEBHOOK_CREATE = "webhook_create"
        WEBHOOK_DELETE = "webhook_delete"
        WEBHOOK_RESUME = "webhook_resume"

    # Empty for an application token's rows (it reaches namespaces by prefix).
    namespace = models.ForeignKey(Namespace, on_delete=models.PROTECT, related_name="audit",
                                  null=True, blank=True)
    actor = models.CharField(max_length=200)  # user:<name>, cli or system
    action = models.CharField(max_length=32, choices=Action.choices)
    target = models.CharField(max_length=200)  # "token pmem_ab12… (name)" or "user alice"
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["namespace", "-id"], name="audit_namespace_idx")]

    def __str__(self) -> str:
        return f"{self.actor} {self.action} {self.target}"
