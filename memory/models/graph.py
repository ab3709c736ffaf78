"""The provenance graph's tables (SPEC §1): Evidence, Cell (key), Version, Operation,
Tombstone, and the typed edges between them — ``Version.supersedes``, ``Version.alternative_of``,
``SupportEdge`` (supported_by), ``Tombstone.version`` (revokes) — with the frontier index's
copies, key aliases and status spans."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models import Q
from pgvector.django import HnswIndex, VectorField

from memory.domain import HEAD_STATUSES, EvidenceState, OpType, Status, vocabulary

from .access import Namespace

EMBED_DIM = settings.PMEM_EMBED_DIM
HEAD_Q = Q(status__in=[s for s in Status if s in HEAD_STATUSES])


class Evidence(models.Model):
    """One raw observation, stored before anything else happens (SPEC §5.1)."""

    class State(models.TextChoices):
        PENDING = EvidenceState.PENDING.value
        PROCESSING = EvidenceState.PROCESSING.value
        COMMITTED = EvidenceState.COMMITTED.value
        FAILED = EvidenceState.FAILED.value

    # Indexed by evidence_seq_unique (namespace, seq): no separate index (each index is one more insert per row).
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
    # (memory.services.writer): exact history totals without counting rows.
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
            # No HNSW index on this table: every non-HOT update of a row — each
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
    commits."""

    # No foreign-key constraint in the database: the copy is derived data the flush keeps
    # consistent itself (it drops copies whose cell is gone; the ORM cascades a cell's
    # deletion), and a constraint's check takes a KEY SHARE lock on the cell per copy, which
    # a commit's SELECT ... FOR UPDATE of that cell waits for.
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

    # Indexed by op_log_idx / op_key_idx, evidence by op_evidence_idx (each index
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
            # The review queue's "closed by later writes": few rows, so cheap.
            models.Index(fields=["namespace", "-id"], condition=Q(payload__has_key="closed_contest"),
                         name="op_closed_contest_idx"),
        ]


class Version(models.Model):
    """One (key, value) pair. The value never changes; status and edges are re-typed."""

    # cell is indexed by version_cell_status_idx (cell, status); nothing reads versions by
    # namespace alone (each index is one more insert per version).
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
    # 1-based position in the key's history, in commit order: the keyset of
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
    """One stretch of time during which a version had one status (what time travel reads).

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


