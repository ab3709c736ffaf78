"""The provenance graph in PostgreSQL (SPEC §1).

Nodes: Namespace, Evidence, Cell (key), Version, Operation, Tombstone. Typed edges:
``Version.supersedes`` (supersedes), ``Version.alternative_of`` (alternative_of),
``SupportEdge`` (supported_by), ``Tombstone.version`` (revokes). Writes go through
``memory.services``; these classes hold fields, constraints and indexes only.

(Over 450 lines on purpose: one app's tables in one module, as Django's migrations see them;
each class is fields, constraints and indexes with the reason for each, and splitting them
would only scatter the constraints that hold between them.)
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models import Q
from pgvector.django import HnswIndex, VectorField

from memory.domain import HEAD_STATUSES, EvidenceState, OpType, Status, vocabulary
from memory.domain.scopes import LEGACY_SCOPE, Scope

EMBED_DIM = settings.PMEM_EMBED_DIM
HEAD_Q = Q(status__in=[s for s in Status if s in HEAD_STATUSES])


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


def _new_token() -> str:
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


class Evidence(models.Model):
    """One raw observation, stored before anything else happens (SPEC §5.1)."""

    class State(models.TextChoices):
        PENDING = EvidenceState.PENDING.value
        PROCESSING = EvidenceState.PROCESSING.value
        COMMITTED = EvidenceState.COMMITTED.value
        FAILED = EvidenceState.FAILED.value

    # Indexed by evidence_seq_unique (namespace, seq): no separate index (decision 17).
    namespace = models.ForeignKey(Namespace, on_delete=models.PROTECT, related_name="evidence",
                                  db_index=False)
    seq = models.BigIntegerField()
    text = models.TextField(blank=True, default="")
    facts = models.JSONField(null=True, blank=True)  # structured facts as the client sent them
    # A chat session as the client sent it ([{role, content, name?, at?}]); ``text`` holds its
    # transcript (memory.domain.conversation).
    messages = models.JSONField(null=True, blank=True)
    # The client sent facts and asked for its text to be extracted too (SPEC §5.2: else the
    # text is the facts' evidence only). Steers an extraction not yet done: not exported.
    extract_text = models.BooleanField(default=False, db_default=False)
    source = models.CharField(max_length=200, blank=True, default="")
    observed_at = models.DateTimeField(null=True, blank=True)  # valid time
    received_at = models.DateTimeField(auto_now_add=True)  # transaction time
    # The hex SHA-256 of the client's key, never the key itself (SPEC §6).
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)
    # The hex SHA-256 of what the keyed request asked for, so that the key reused with another
    # body is refused (409) rather than replayed; NULL when unknown (rows from before it was
    # kept, or whose content an erase redacted): such a key replays.
    request_digest = models.CharField(max_length=64, null=True, blank=True)
    actor = models.CharField(max_length=200, default="")
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    error = models.TextField(blank=True, default="")
    # Extraction result, written once (compare-and-swap) so a redelivered task reuses it.
    extracted = models.JSONField(null=True, blank=True)
    committed_at = models.DateTimeField(null=True, blank=True)
    # Until when a queued task is expected to come back for it (memory.services.sweep); empty:
    # PMEM_SWEEP_EVERY after received_at.
    lease_until = models.DateTimeField(null=True, blank=True)
    chat_calls = models.IntegerField(default=0)
    embed_calls = models.IntegerField(default=0)
    prompt_tokens = models.IntegerField(default=0)
    completion_tokens = models.IntegerField(default=0)
    embedding = VectorField(dimensions=EMBED_DIM, null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["namespace", "seq"], name="evidence_seq_unique"),
            models.UniqueConstraint(
                fields=["namespace", "idempotency_key"], condition=Q(idempotency_key__isnull=False),
                name="evidence_idempotency_unique",
            ),
        ]
        indexes = [
            # The commit drain asks for the lowest unsettled seq of a namespace.
            models.Index(fields=["namespace", "seq"],
                         condition=Q(state__in=[s.value for s in vocabulary.UNSETTLED_STATES]),
                         name="evidence_unsettled_idx"),
            HnswIndex(name="evidence_embedding_hnsw", fields=["embedding"], m=16,
                      ef_construction=64, opclasses=["vector_cosine_ops"]),
            # Also, in SQL only (migration 0008): evidence_text_tsv (the erase's mention
            # search) and evidence_unembedded_idx (what an erase left to re-embed).
        ]

    def __str__(self) -> str:
        return f"evidence {self.namespace_id}#{self.seq}"


class Cell(models.Model):
    """A key of a namespace: canonical name, head pointer, ``key: value`` embedding."""

    # No index of its own: cell_key_unique (namespace, key) serves namespace lookups, and a
    # second candidate let the planner, on stale statistics, scan a whole namespace by it.
    namespace = models.ForeignKey(Namespace, on_delete=models.PROTECT, related_name="cells",
                                  db_index=False)
    key = models.CharField(max_length=255)
    head = models.OneToOneField("Version", null=True, blank=True, on_delete=models.PROTECT,
                                related_name="head_of")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # The text the embedding was computed from; a mismatch with ``key: head value`` marks
    # the embedding stale (it is refreshed after commit, outside the write transaction).
    embedded_text = models.TextField(blank=True, default="")
    # The current ``key: value`` embedding (not indexed here: see FrontierVector).
    embedding = VectorField(dimensions=EMBED_DIM, null=True, blank=True)
    key_embedding = VectorField(dimensions=EMBED_DIM, null=True, blank=True)
    # True from a head move until the frontier index holds the cell's new embedding; the
    # frontier read scans these cells exactly (see FrontierVector).
    vector_stale = models.BooleanField(default=False)
    # How many versions the key holds, kept by the commit in the statement that inserts them
    # (memory.services.writer): exact history totals without counting rows (decision 50).
    version_count = models.IntegerField(default=0, db_default=0)
    # The words of the key and of the head's value, each as "<namespace id>:<word>" (so a GIN
    # lookup stays inside its namespace): the lexical half of the frontier read's ranking
    # (memory.domain.ranking), written by the commit with the head. Null without a head.
    terms = ArrayField(models.TextField(), null=True, blank=True)
    # The head moved and its embedding (or the key's) is still to be computed: a deferred
    # embedder's background pass takes these (memory.services.embeddings).
    embed_pending = models.BooleanField(default=False, db_default=False)

    #: Set by a commit's lock of the cell (memory.services.store): its head may have reached
    #: its expiry (SPEC §13). Never saved.
    expiry_due: bool = False

    class Meta:
        constraints = [models.UniqueConstraint(fields=["namespace", "key"], name="cell_key_unique")]
        indexes = [
            # No HNSW index on this table (decision 15): every non-HOT update of a row — each
            # head move — inserts into each HNSW index on the table, the dearest part of a commit.
            models.Index(fields=["namespace"], condition=Q(vector_stale=True),
                         name="cell_vector_stale_idx"),
            models.Index(fields=["namespace"], condition=Q(embed_pending=True),
                         name="cell_embed_pending_idx"),
            # A small pending list: every lexical lookup reads all of it (as the erase's).
            GinIndex(fields=["terms"], name="cell_terms_gin", gin_pending_list_limit=64),
        ]

    def __str__(self) -> str:
        return self.key


class FrontierVector(models.Model):
    """The HNSW-indexed copy of a headed cell's ``key: value`` embedding (the frontier index).

    Kept apart from the cell row so that a head move is not an HNSW insert: a commit marks the
    cell ``vector_stale`` and deletes its copy (a cheap heap delete); :func:`frontier_flush`
    re-inserts copies in bulk, once per cell however often it moved meanwhile. The frontier
    read searches this index and scans the stale cells exactly, so it is never behind the
    commits (decision 15)."""

    # No foreign-key constraint in the database: the copy is derived data the flush keeps
    # consistent itself (it drops copies whose cell is gone; the ORM cascades a cell's
    # deletion), and a constraint's check takes a KEY SHARE lock on the cell per copy, which
    # a commit's SELECT ... FOR UPDATE of that cell waits for (decision 18).
    cell = models.OneToOneField(Cell, primary_key=True, on_delete=models.CASCADE,
                                related_name="frontier_vector", db_constraint=False)
    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, related_name="+",
                                  db_index=False)
    embedding = VectorField(dimensions=EMBED_DIM)

    class Meta:
        indexes = [
            HnswIndex(name="frontier_embedding_hnsw", fields=["embedding"], m=16,
                      ef_construction=64, opclasses=["vector_cosine_ops"]),
            # A small namespace among large ones is read exactly through this (its copies,
            # sorted) instead of a filtered HNSW walk or a scan of every namespace's copies.
            models.Index(fields=["namespace"], name="frontier_namespace_idx"),
        ]


class KeyAlias(models.Model):
    """Another name soft identity merged into a cell."""

    namespace = models.ForeignKey(Namespace, on_delete=models.PROTECT, related_name="aliases")
    cell = models.ForeignKey(Cell, on_delete=models.CASCADE, related_name="aliases")
    alias = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["namespace", "alias"], name="alias_unique")]


class Operation(models.Model):
    """One applied typed operation (SPEC §1), including refused ones recorded as noop."""

    class Type(models.TextChoices):
        ACCEPT = OpType.ACCEPT.value
        CONTEST = OpType.CONTEST.value
        REJECT = OpType.REJECT.value
        REVOKE = OpType.REVOKE.value
        RESOLVE = OpType.RESOLVE.value
        NOOP = OpType.NOOP.value
        RESTORE = OpType.RESTORE.value
        REINSTATE = vocabulary.REINSTATE  # the reopening of a predecessor by rollback (SPEC §4)
        EXPIRE = vocabulary.EXPIRE  # a version's expiry passed (SPEC §13)

    # Indexed by op_log_idx / op_key_idx, evidence by op_evidence_idx (decision 17: each index
    # is one more insert per operation).
    namespace = models.ForeignKey(Namespace, on_delete=models.PROTECT, related_name="operations",
                                  db_index=False)
    cell = models.ForeignKey(Cell, null=True, blank=True, on_delete=models.CASCADE,
                             related_name="operations")
    key = models.CharField(max_length=255)
    type = models.CharField(max_length=16, choices=Type.choices)
    requested = models.CharField(max_length=16, blank=True, default="")  # what was asked for
    actor = models.CharField(max_length=200)
    evidence = models.ForeignKey(Evidence, null=True, blank=True, on_delete=models.PROTECT,
                                 related_name="operations", db_index=False)
    seq = models.BigIntegerField(null=True, blank=True)  # the evidence seq, when there is one
    version = models.ForeignKey("Version", null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="+")  # the version it created or targeted
    value = models.TextField(null=True, blank=True)
    payload = models.JSONField(default=dict)  # the patch as applied, and its effects
    reason = models.TextField(blank=True, default="")
    raw_output = models.TextField(blank=True, default="")
    prompt_tokens = models.IntegerField(default=0)
    completion_tokens = models.IntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    # SPEC §3: how it was decided (``actor`` says who asked), and its evidence's source.
    method = models.CharField(max_length=16, default=vocabulary.Method.EXPLICIT.value,
                              choices=[(m.value, m.value) for m in vocabulary.Method])
    source = models.CharField(max_length=200, blank=True, default="")

    class Meta:
        indexes = [
            models.Index(fields=["namespace", "-id"], name="op_log_idx"),
            models.Index(fields=["namespace", "key", "-id"], name="op_key_idx"),
            models.Index(fields=["evidence"], name="op_evidence_idx"),
            # The review queue's "closed by later writes" (decision 63): few rows, so cheap.
            models.Index(fields=["namespace", "-id"], condition=Q(payload__has_key="closed_contest"),
                         name="op_closed_contest_idx"),
        ]


class Version(models.Model):
    """One (key, value) pair. The value never changes; status and edges are re-typed."""

    # cell is indexed by version_cell_status_idx (cell, status); nothing reads versions by
    # namespace alone (decision 17: each index is one more insert per version).
    namespace = models.ForeignKey(Namespace, on_delete=models.PROTECT, related_name="versions",
                                  db_index=False)
    cell = models.ForeignKey(Cell, on_delete=models.CASCADE, related_name="versions",
                             db_index=False)
    value = models.TextField()
    status = models.CharField(max_length=16, choices=[(s.value, s.value) for s in Status])
    valid_from = models.DateTimeField()
    valid_to = models.DateTimeField(null=True, blank=True)
    support = models.IntegerField(default=0)
    created_by = models.ForeignKey(Operation, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    supersedes = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT,
                                   related_name="superseded_by")
    alternative_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT,
                                       related_name="alternatives")
    created_at = models.DateTimeField(auto_now_add=True)
    # 1-based position in the key's history, in commit order (decision 50): the keyset of
    # history pages and graph windows, and with Cell.version_count their exact counts.
    ordinal = models.IntegerField()
    # The fact's metadata (a flat object, memory.domain.metadata), kept with the version it
    # created; NULL: none. Heads with metadata are indexed for filters (migration 0015,
    # version_head_metadata_idx, in SQL only: an expression with the namespace).
    metadata = models.JSONField(null=True, blank=True)
    # SPEC §3 ``restore``: the revoked or contradicted version this one brought back.
    # Indexed only where set (version_restores_idx): almost every version has none.
    restores = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT,
                                 related_name="restored_by", db_index=False)
    # SPEC §13: from this instant the version is never current (memory.services.expiry);
    # NULL: it never expires. Indexed where set on open versions (version_expiry_idx).
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # The functional key: at most one head per key, enforced by PostgreSQL.
            models.UniqueConstraint(fields=["cell"], condition=HEAD_Q, name="one_head_per_key"),
            models.CheckConstraint(
                condition=Q(supersedes__isnull=True) | Q(supersedes__lt=models.F("id")),
                name="supersedes_points_backward",
            ),
            # Serves every bounded read of a key's history: pages, windows, jumps by id.
            models.UniqueConstraint(fields=["cell", "ordinal"], name="version_ordinal_unique"),
        ]
        indexes = [
            models.Index(fields=["cell", "status"], name="version_cell_status_idx"),
            # As of T: how many versions the key held then (the last ordinal created by T).
            models.Index(fields=["cell", "created_at"], name="version_cell_created_idx"),
            models.Index(fields=["restores"], condition=Q(restores__isnull=False),
                         name="version_restores_idx"),
            # What is due to expire: few rows (only open versions that carry an expiry).
            models.Index(fields=["namespace", "expires_at"],
                         condition=Q(expires_at__isnull=False,
                                     status__in=sorted(s.value for s in vocabulary.OPEN_STATUSES)),
                         name="version_expiry_idx"),
            # Also, in SQL only (migration 0008): version_value_tsv, the GIN index of the
            # folded value's lexemes, read by the erase and by the history's search (dec. 52).
        ]

    def __str__(self) -> str:
        return f"{self.value} ({self.status})"


class VersionSpan(models.Model):
    """One stretch of time during which a version had one status (decision 50: time travel).

    The commit that changes a version's status closes its open span (``until``) and opens the
    next one, in the same statement as the change (memory.services.writer); a span opens and
    closes at commit times, so "memory as of T" reads, per version, the span with
    ``since <= T < until``. The head of a cell at T is its head-status span covering T."""

    cell = models.ForeignKey(Cell, on_delete=models.CASCADE, related_name="+", db_index=False)
    version = models.ForeignKey(Version, on_delete=models.CASCADE, related_name="spans",
                                db_index=False)  # span_version_idx
    status = models.CharField(max_length=16, choices=[(s.value, s.value) for s in Status])
    since = models.DateTimeField()
    until = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            # The status of a version at T: its last span that began by T.
            models.Index(fields=["version", "since"], name="span_version_idx"),
            # The head of a cell at T (and the start of the contest it was in).
            models.Index(fields=["cell", "since"], condition=HEAD_Q, name="span_head_idx"),
            # The alternatives of a cell at T, since its contest began.
            models.Index(fields=["cell", "since"], condition=Q(status=Status.ALTERNATIVE),
                         name="span_alternative_idx"),
            # The key's changes around T (step back / forward through them).
            models.Index(fields=["cell", "since"], name="span_cell_idx"),
        ]


class SupportEdge(models.Model):
    """supported_by: this observation (or this person's operation) supports this value."""

    version = models.ForeignKey(Version, on_delete=models.CASCADE, related_name="support_edges")
    evidence = models.ForeignKey(Evidence, null=True, blank=True, on_delete=models.PROTECT,
                                 related_name="support_edges",
                                 db_index=False)  # support_evidence_idx
    operation = models.ForeignKey(Operation, on_delete=models.CASCADE, related_name="+")

    class Meta:
        indexes = [models.Index(fields=["evidence"], name="support_evidence_idx")]


class Tombstone(models.Model):
    """Marks one revocation of one version (revokes edge → ``version``)."""

    version = models.ForeignKey(Version, on_delete=models.CASCADE, related_name="tombstones")
    operation = models.ForeignKey(Operation, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)


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


# --- the change feed (SPEC §12) -----------------------------------------------------------------


class ChangeEvent(models.Model):
    """One committed operation as the change feed (and the webhook outbox) serves it, written in
    the commit's transaction. ``cursor`` orders a namespace's events in commit order: it is
    handed out under :class:`ChangeCounter`'s row lock, held until the commit. Self-contained
    (values copied, no foreign key to versions or operations): an erase deletes a key's rows
    outright, and nothing else ever changes one, except the key of an ``erase`` event blanked
    after its retention."""

    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, related_name="+",
                                  db_index=False)  # the unique (namespace, cursor) index serves
    cursor = models.BigIntegerField()
    operation_id = models.BigIntegerField(null=True, blank=True)  # none for an erase event
    op = models.CharField(max_length=16)
    key = models.CharField(max_length=255, blank=True)
    version_id = models.BigIntegerField(null=True, blank=True)
    ordinal = models.IntegerField(null=True, blank=True)
    value = models.TextField(null=True, blank=True)
    previous = models.JSONField(null=True, blank=True)  # {version, ordinal, value}: displaced
    head = models.JSONField(null=True, blank=True)  # {version, ordinal, value}: head after it
    status = models.CharField(max_length=16, blank=True, default="")  # the version's, after
    cell_status = models.CharField(max_length=16, blank=True, default="")  # the cell's, after
    actor = models.CharField(max_length=200, blank=True, default="")
    method = models.CharField(max_length=16, blank=True, default="")
    reason = models.TextField(blank=True, default="")
    # No foreign key (an erase or a deletion removes observations in batches of its own); the
    # event's ``source`` is this observation's, read with it, so a redaction reaches it.
    observation_id = models.BigIntegerField(null=True, blank=True)
    committed_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["namespace", "cursor"],
                                               name="changeevent_cursor_unique")]
        indexes = [
            # An erase deletes its key's events.
            models.Index(fields=["namespace", "key"], name="changeevent_key_idx"),
            # The retention sweep finds the erase events whose key it blanks.
            models.Index(fields=["committed_at"], condition=Q(op="erase") & ~Q(key=""),
                         name="changeevent_erase_idx"),
        ]


class ChangeCounter(models.Model):
    """A namespace's last handed-out change cursor. Its own row, not the namespace's: recording
    observations locks the namespace row, and a commit takes this lock last (after its cells),
    so the two never wait on each other in a cycle."""

    namespace = models.OneToOneField(Namespace, on_delete=models.CASCADE, primary_key=True,
                                     related_name="+")
    last = models.BigIntegerField(default=0)


# Webhooks of the change feed (SPEC §12). The event log is their outbox: an endpoint keeps only
# a cursor into it (``delivered``), so nothing is copied per endpoint and an erase that removes
# events from the log removes them from every endpoint's future deliveries.


class WebhookEndpoint(models.Model):
    """A URL that receives its namespace's change events, one at a time in cursor order."""

    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, related_name="webhooks")
    url = models.CharField(max_length=2000)
    secret = models.CharField(max_length=100)  # whsec_…: the receiver needs it to verify
    # The ops it wants (accept, reject, erase, …); empty: every event.
    ops = ArrayField(models.CharField(max_length=32), default=list, blank=True)
    created_by = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)
    # False once it has failed for PMEM_WEBHOOK_PAUSE_AFTER in a row (or paused by hand);
    # resuming carries on from ``delivered``: nothing is skipped.
    active = models.BooleanField(default=True)
    # The cursor of the last event answered with a 2xx (or passed over by ``ops``).
    delivered = models.BigIntegerField(default=0)
    # Failed attempts at the event after ``delivered`` in a row, since when, and when the
    # next one is due (None: now).
    attempts = models.IntegerField(default=0)
    failing_since = models.DateTimeField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True, default="")


class WebhookDelivery(models.Model):
    """One attempt to deliver one event (no content: an erased value must not stay here)."""

    class Outcome(models.TextChoices):
        DELIVERED = "delivered"  # a 2xx
        FAILED = "failed"  # another status
        TIMEOUT = "timeout"
        UNREACHABLE = "unreachable"  # no connection
        REFUSED = "refused"  # the target's address may not be called

    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE,
                                 related_name="deliveries")
    cursor = models.BigIntegerField()
    webhook_id = models.CharField(max_length=64)
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    status_code = models.IntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True, default="")
    seconds = models.FloatField(default=0.0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["endpoint", "-id"], name="webhook_delivery_idx")]
