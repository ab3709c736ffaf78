"""The shape of every answer of the HTTP API: one output serializer each, which renders the answer
(:meth:`memory.api.render.Out.render`) and states it in the served OpenAPI schema: the schema is
the truth (tests/api/test_schema_conformance.py, tests/agents/test_client_types.py).

The graph window and the operation log are :mod:`memory.api.graph_outputs`', the change feed's
:mod:`memory.api.change_outputs`'; the rest are here, in the order of CONTRACT's tables."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field
from rest_framework import serializers

from memory.domain import CellStatus, EvidenceState
from memory.domain.scopes import Scope

from .render import OneOf, Out
from .serializers import MetadataField

#: The two vocabularies answered under a field named ``status``, named in the schema by
#: SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"].
CELL_STATUSES = [status.value for status in CellStatus]
OBSERVATION_STATES = [state.value for state in EvidenceState]
REPLAYED = ("True when the idempotency_key was used before with the same request: this is the "
            "first observation, nothing new was stored.")

# --- observations ----------------------------------------------------------------------------


def expires_at_field() -> serializers.DateTimeField:
    """The instant the version stops being current (SPEC §13); null: never."""
    return serializers.DateTimeField(
        allow_null=True, required=False,
        help_text="from this instant the version is never current (SPEC §13); null: never")


class FactOut(Out):
    """A fact as the client sent it (CONTRACT "Observations")."""

    key = serializers.CharField()
    value = serializers.CharField(allow_null=True, required=False)
    op = serializers.CharField(required=False)
    version = serializers.IntegerField(required=False)
    hard_commit = serializers.BooleanField(required=False)
    reason = serializers.CharField(required=False, allow_blank=True)
    metadata = MetadataField(required=False, allow_null=True)
    ttl = serializers.IntegerField(required=False, help_text="seconds, as sent (SPEC §13)")
    expires_at = serializers.CharField(required=False, help_text="as sent (SPEC §13)")


class OperationSummaryOut(Out):
    op = serializers.CharField()
    requested = serializers.CharField(help_text="what was asked (op: what happened)")
    key = serializers.CharField()
    value = serializers.CharField(allow_null=True)
    version = serializers.IntegerField(allow_null=True)
    ordinal = serializers.IntegerField(
        allow_null=True, required=False,
        help_text="the version's position in its key's history (the explorer's vN)")
    status = serializers.CharField(allow_null=True, help_text="the version's status now")
    reason = serializers.CharField(allow_blank=True)
    actor = serializers.CharField()
    method = serializers.CharField()
    source = serializers.CharField(allow_blank=True)  # type: ignore[assignment]


class CostOut(Out):
    chat_calls = serializers.IntegerField()
    embed_calls = serializers.IntegerField()
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()


class DroppedFactOut(Out):
    key = serializers.CharField(allow_blank=True)
    value = serializers.CharField(allow_blank=True)
    reason = serializers.CharField()


class ExtractionOut(Out):
    extractor = serializers.CharField(allow_null=True)
    raw = serializers.CharField(allow_blank=True, help_text="the model's answer as received")
    error = serializers.CharField(allow_null=True)
    dropped = DroppedFactOut(many=True, help_text="facts a model extracted that were refused "
                                                  "before anything was written")


class MessageOut(Out):
    role = serializers.CharField()
    content = serializers.CharField()
    name = serializers.CharField(required=False)
    at = serializers.CharField(required=False, help_text="ISO 8601 in UTC")


class ObservationAcceptedOut(Out):
    """An observation stored and queued, not committed yet."""

    id = serializers.IntegerField()
    seq = serializers.IntegerField()
    status = serializers.ChoiceField(choices=OBSERVATION_STATES)
    replayed = serializers.BooleanField(help_text=REPLAYED)


class ObservationBatchOut(Out):
    """A batch of observations: one result per item, in the order sent."""

    results = ObservationAcceptedOut(many=True)


class ObservationOut(Out):
    id = serializers.IntegerField()
    seq = serializers.IntegerField()
    status = serializers.ChoiceField(choices=OBSERVATION_STATES)
    error = serializers.CharField(allow_blank=True)
    source = serializers.CharField(allow_blank=True)  # type: ignore[assignment]
    text = serializers.CharField(allow_blank=True)
    facts = FactOut(many=True, allow_null=True)
    messages = MessageOut(
        many=True, allow_null=True, required=False,
        help_text="The chat session it was sent as (its text is their transcript); null "
                  "for an observation sent without messages.")
    observed_at = serializers.DateTimeField(allow_null=True)
    received_at = serializers.DateTimeField()
    committed_at = serializers.DateTimeField(allow_null=True)
    operations = OperationSummaryOut(many=True)
    cost = CostOut()
    extraction = ExtractionOut(allow_null=True)
    facts_found = serializers.IntegerField(
        allow_null=True, help_text="How many facts the observation yielded (null before "
                                   "extraction).")
    note = serializers.CharField(
        allow_blank=True, help_text="Said in words when a committed observation yielded no fact.")
    replayed = serializers.BooleanField(required=False, help_text=REPLAYED)


class ErrorOut(Out):
    error = serializers.CharField()
    field = serializers.CharField(required=False, help_text="the input at fault")
    errors = serializers.JSONField(  # type: ignore[assignment]  # a field, not .errors
        required=False, help_text="every refusal, by field")
    observation = serializers.IntegerField(
        required=False, help_text="409 of a reused idempotency_key: the first observation")


class MentionOut(Out):
    kind = serializers.ChoiceField(choices=["cell", "operation", "evidence"])
    id = serializers.IntegerField()
    key = serializers.CharField(required=False)


class EraseReportOut(Out):
    key = serializers.CharField()
    redacted_evidence = serializers.IntegerField()
    versions_erased = serializers.IntegerField()
    mentions = MentionOut(many=True)
    mentions_truncated = serializers.BooleanField()
    values_unsearched = serializers.IntegerField(
        help_text="erased values the mention search could not look up")
    values_unsearched_by_reason = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="why: no_letter_or_digit (nothing a full-text index holds), out_of_time "
                  "(the search's time was spent before it reached them)")


# --- cells, history, timeline ------------------------------------------------------------------


class VersionOut(Out):
    version = serializers.IntegerField()
    value = serializers.CharField(allow_blank=True)
    status = serializers.CharField()
    valid_from = serializers.DateTimeField()
    valid_to = serializers.DateTimeField(allow_null=True)
    ordinal = serializers.IntegerField(required=False,
                                       help_text="1-based position in the key's history")
    metadata = MetadataField(
        allow_null=True, required=False,
        help_text="the metadata the fact that created the version carried (null: none)")
    expires_at = expires_at_field()


class AlternativeOut(Out):
    version = serializers.IntegerField()
    value = serializers.CharField(allow_blank=True)
    support = serializers.IntegerField(allow_null=True, help_text="null as of a past time")
    ordinal = serializers.IntegerField(
        allow_null=True, required=False,
        help_text="the version's position in its key's history (the explorer's vN)")
    metadata = MetadataField(
        allow_null=True, required=False,
        help_text="the metadata the fact that created the version carried (null: none)")
    expires_at = expires_at_field()


class CellOut(Out):
    omit = {"as_of": None, "updated_at": None}

    key = serializers.CharField()
    value = serializers.CharField(allow_null=True, allow_blank=True)
    status = serializers.ChoiceField(choices=CELL_STATUSES)
    version = serializers.IntegerField(allow_null=True)
    ordinal = serializers.IntegerField(
        allow_null=True, required=False,
        help_text="the version's position in its key's history (the explorer's vN)")
    metadata = MetadataField(
        allow_null=True, required=False,
        help_text="the metadata the fact that created the version carried (null: none)")
    expires_at = expires_at_field()
    support = serializers.IntegerField()
    alternatives = AlternativeOut(many=True)
    history = VersionOut(many=True, help_text="at most `history` entries, newest first")
    history_total = serializers.IntegerField()
    history_next = serializers.CharField(allow_null=True,
                                         help_text="cursor: GET …/history/?before=<it>")
    aliases = serializers.ListField(child=serializers.CharField())
    rendered = serializers.CharField(help_text="the cell as a read's context line shows it")
    as_of = serializers.DateTimeField(required=False)
    created_at = serializers.DateTimeField(required=False,
                                           help_text="when the key was first written")
    updated_at = serializers.DateTimeField(
        required=False, help_text="when its current value last changed (not as of a time)")


class CellRowOut(Out):
    """A cell of a page of cells: now, with its newest history; as of T, its value, status and
    how many versions it held then (``support`` is null: the present's only)."""

    key = serializers.CharField()
    value = serializers.CharField(allow_null=True, allow_blank=True)
    status = serializers.ChoiceField(choices=CELL_STATUSES)
    version = serializers.IntegerField(allow_null=True)
    ordinal = serializers.IntegerField(
        allow_null=True, required=False,
        help_text="the version's position in its key's history (the explorer's vN)")
    metadata = MetadataField(
        allow_null=True, required=False,
        help_text="the metadata the fact that created the version carried (null: none)")
    expires_at = expires_at_field()
    support = serializers.IntegerField(allow_null=True)
    created_at = serializers.DateTimeField(required=False)
    updated_at = serializers.DateTimeField(required=False)
    alternatives = AlternativeOut(many=True, required=False)
    history = VersionOut(many=True, required=False)
    history_total = serializers.IntegerField()
    aliases = serializers.ListField(child=serializers.CharField(), required=False)
    as_of = serializers.DateTimeField(required=False)


class CellListOut(Out):
    omit = {"as_of": None}

    results = CellRowOut(many=True)
    next = serializers.CharField(allow_null=True)
    as_of = serializers.DateTimeField(required=False)


class HistoryPageOut(Out):
    omit = {"as_of": None, "total_capped": False}

    results = VersionOut(many=True)
    next = serializers.CharField(allow_null=True, help_text="cursor for `before`")
    total = serializers.IntegerField()
    next_url = serializers.CharField(allow_null=True)
    total_capped = serializers.BooleanField(required=False)
    as_of = serializers.DateTimeField(required=False)


class TimelineBinOut(Out):
    bucket = serializers.IntegerField()
    counts = serializers.DictField(child=serializers.IntegerField())
    first_ordinal = serializers.IntegerField()
    last_ordinal = serializers.IntegerField()
    last_version = serializers.IntegerField()
    to = serializers.DateTimeField()
    # "from" is a Python keyword: declared through the class namespace.
    locals()["from"] = serializers.DateTimeField()
    first_version = serializers.IntegerField(allow_null=True)


class TimelineOut(Out):
    key = serializers.CharField()
    total = serializers.IntegerField()
    start = serializers.DateTimeField(allow_null=True)
    end = serializers.DateTimeField(allow_null=True)
    buckets = serializers.IntegerField()
    statuses = serializers.ListField(child=serializers.CharField())
    as_of = serializers.DateTimeField(allow_null=True)
    bins = TimelineBinOut(many=True)


# --- reads -------------------------------------------------------------------------------------


class FrontierItemOut(Out):
    """A cell of a frontier read: its line of the context and its score."""

    key = serializers.CharField()
    value = serializers.CharField(allow_null=True, allow_blank=True)
    status = serializers.CharField()
    version = serializers.IntegerField(allow_null=True)
    ordinal = serializers.IntegerField(
        allow_null=True, required=False,
        help_text="the version's position in its key's history (the explorer's vN)")
    metadata = MetadataField(
        allow_null=True, required=False,
        help_text="the metadata the fact that created the version carried (null: none)")
    expires_at = expires_at_field()
    support = serializers.IntegerField(required=False)
    created_at = serializers.DateTimeField(required=False)
    updated_at = serializers.DateTimeField(required=False)
    score = serializers.FloatField()
    # The parts the default frontier read fuses (SPEC §7): the cosine (null for a cell not
    # embedded yet) and the exact words' share; frontier_cosine's score is the cosine alone.
    semantic_score = serializers.FloatField(required=False, allow_null=True)
    lexical_score = serializers.FloatField(required=False)
    line = serializers.CharField()


class MessageHitOut(Out):
    """A message of a chat session that the evidence read found: where it is in the session,
    what it says and its score parts."""

    index = serializers.IntegerField(help_text="its number in the session, from 1")
    role = serializers.CharField(allow_blank=True)
    name = serializers.CharField(required=False)
    at = serializers.CharField(required=False, help_text="its time, ISO 8601, where given")
    content = serializers.CharField(allow_blank=True)
    line = serializers.CharField(help_text="its line of the session's transcript")
    score = serializers.FloatField()
    semantic_score = serializers.FloatField(allow_null=True)
    lexical_score = serializers.FloatField()


class EvidenceItemOut(Out):
    """An observation of a raw or evidence read: its line of the context and its score."""

    id = serializers.IntegerField()
    seq = serializers.IntegerField()
    text = serializers.CharField(allow_blank=True)
    score = serializers.FloatField()
    # The parts the evidence read fuses (SPEC §7): the cosine (null for an observation not
    # embedded yet) and the query's word weight it holds; raw's score is the cosine alone.
    semantic_score = serializers.FloatField(required=False, allow_null=True)
    lexical_score = serializers.FloatField(required=False)
    # The evidence read of a chat session: the messages among its top k (the item's scores
    # are the best one's), and its text their transcript lines, not the whole session.
    messages = MessageHitOut(many=True, required=False)
    source = serializers.CharField(allow_blank=True)  # type: ignore[assignment]
    observed_at = serializers.DateTimeField(allow_null=True)
    received_at = serializers.DateTimeField()


@extend_schema_field(PolymorphicProxySerializer(
    component_name="ReadItem", serializers=[FrontierItemOut, EvidenceItemOut],
    resource_type_field_name=None))
class ReadItemField(OneOf):
    @classmethod
    def pick(cls, value: Any) -> type[Out]:
        return FrontierItemOut if "key" in value else EvidenceItemOut


class ReadOut(Out):
    omit = {"note": "", "available": True}

    mode = serializers.CharField()
    context = serializers.CharField(allow_blank=True)  # type: ignore[assignment]  # see source
    items = serializers.ListField(child=ReadItemField())
    context_chars = serializers.IntegerField()
    note = serializers.CharField(required=False)
    available = serializers.BooleanField(
        required=False, help_text="false: this mode cannot read here (it says why in note)")


class AnswerCostOut(Out):
    chat_calls = serializers.IntegerField()
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()


class LookupOut(Out):
    entity = serializers.CharField(allow_blank=True)
    relation = serializers.CharField(allow_blank=True)
    found = serializers.CharField()


class AnswerOut(Out):
    answer = serializers.CharField(allow_blank=True)
    mode = serializers.CharField()
    context = serializers.CharField(allow_blank=True)  # type: ignore[assignment]  # see source
    context_chars = serializers.IntegerField()
    lookups = LookupOut(many=True)
    error = serializers.CharField(allow_null=True)
    cost = AnswerCostOut()


# --- the token ---------------------------------------------------------------------------------


class WhoAmIOut(Out):
    """Rendered from the token itself."""
    namespace = serializers.CharField(
        source="namespace_name", allow_null=True,
        help_text="the namespace the token reaches (null: an application token, which reaches "
                  "those of namespace_prefix)")
    namespace_prefix = serializers.CharField(
        source="application_prefix", allow_null=True,
        help_text="an application token's: it reaches every namespace whose name starts with "
                  "this, and its first write to one creates it")
    scope = serializers.ChoiceField(choices=[s.value for s in Scope])
    client = serializers.CharField(help_text="operations are signed api:<client>")
    name = serializers.CharField(allow_blank=True)
    prefix = serializers.CharField(help_text="the token's first characters (the rest is secret)")
    expires_at = serializers.DateTimeField(allow_null=True)
    sources = serializers.ListField(
        child=serializers.CharField(),
        help_text="the trusted sources a write token may name (any source without a trust "
                  "level too); one alone is the source of writes that name none")


# --- namespaces (SPEC §13) ---------------------------------------------------------------------


class NamespaceRowOut(Out):
    name = serializers.CharField()
    cells = serializers.IntegerField(help_text="how many keys it holds")
    created_at = serializers.DateTimeField()
    last_write_at = serializers.DateTimeField(
        allow_null=True, help_text="its newest observation or operation; null: none yet")


class NamespaceListOut(Out):
    results = NamespaceRowOut(many=True)
    next = serializers.CharField(allow_null=True)


class NamespaceDeletedOut(Out):
    deleted = serializers.BooleanField()
    name_digest = serializers.CharField(help_text="hex SHA-256 of the deleted name (the audit's)")
    counts = serializers.DictField(child=serializers.IntegerField(),
                                   help_text="cells, versions, operations, observations, "
                                             "tokens and members it held")
