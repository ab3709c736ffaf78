"""Input and output shapes of the HTTP API. Validation only: no logic, no writes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from memory.domain import (
    DISCLOSURES,
    KEY_MAX_CHARS,
    OBSERVATION_OPS,
    VALUE_OPS,
    CellStatus,
    EvidenceState,
    OpType,
    normalize_key,
)
from memory.domain.instants import TimeRefused, parse_instant
from memory.domain.metadata import Metadata, MetadataRefused, clean_metadata
from memory.domain.scopes import Scope
from memory.reads import ANSWER_MODES, READ_MODES


class StrictCharField(serializers.CharField):
    """A JSON string and nothing else (DRF would coerce numbers and booleans)."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    """A JSON integer: not a string of digits, not a boolean."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictFloatField(serializers.FloatField):
    """A JSON number: not a string of digits, not a boolean."""

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        return super().to_internal_value(data)


class InstantField(serializers.DateTimeField):
    """A JSON string read by the one parser of times (:mod:`memory.domain.instants`): UTC out,
    a refusal naming the field for what PostgreSQL could not hold. A time without a zone is
    read as UTC, as this field always read it."""

    def to_internal_value(self, value: Any) -> datetime:
        if not isinstance(value, str):
            self.fail("invalid", format="an ISO-8601 string")
        try:
            moment = parse_instant(value, field=self.field_name or "time", zone=UTC)
        except TimeRefused as refused:
            raise serializers.ValidationError(refused.message) from None
        if moment is None:
            self.fail("invalid", format="an ISO-8601 string")
        return moment


class StrictBooleanField(serializers.BooleanField):
    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


BIGINT_MAX = 2**63 - 1
#: What the cell-operations endpoint takes (``restore`` included) ...
OPS = [o.value for o in OpType]
#: ... and what a fact of an observation may carry (``restore`` is a person's, SPEC §3).
FACT_OPS = [o.value for o in OBSERVATION_OPS]


def _key_field() -> serializers.CharField:
    return StrictCharField(max_length=settings.PMEM_MAX_KEY_CHARS)


def key_problem(key: str) -> str | None:
    """Why ``key`` cannot name a cell (SPEC §1), or None: nothing left once normalised, or
    longer than the store holds (NFKC can expand a character: U+FDFA is 18 letters)."""
    canonical = normalize_key(key)
    if not canonical:
        return "the key has no letters, marks or digits (of any script)"
    if len(canonical) > KEY_MAX_CHARS:
        return f"the key is over {KEY_MAX_CHARS} characters once normalised"
    return None


def _value_field() -> serializers.CharField:
    return StrictCharField(max_length=settings.PMEM_MAX_VALUE_CHARS, required=False,
                           allow_null=True, trim_whitespace=False)


def _check_op_args(attrs: dict[str, Any]) -> dict[str, Any]:
    op = attrs.get("op") or OpType.ACCEPT
    value, version = attrs.get("value"), attrs.get("version")
    has_value = value is not None and value.strip() != ""
    if op in VALUE_OPS and not has_value:
        raise serializers.ValidationError({"value": f"{op} needs a non-empty value"})
    if op == OpType.RESOLVE and not has_value and version is None:
        raise serializers.ValidationError({"value": "resolve needs the winner's value or version"})
    if op == OpType.RESTORE and version is None:
        raise serializers.ValidationError({"version": "restore needs the version to restore"})
    return attrs


#: The schema of metadata (memory.domain.metadata), in and out.
METADATA_SCHEMA = {"type": "object", "nullable": True,
                   "additionalProperties": {"oneOf": [{"type": "string"}, {"type": "number"},
                                                      {"type": "boolean"}]}}


@extend_schema_field(METADATA_SCHEMA)
class MetadataField(serializers.Field):
    """A flat JSON object of strings, numbers and booleans (memory.domain.metadata): what a
    fact carries, and what a filter asks for. An empty object is none (None)."""

    def to_internal_value(self, data: Any) -> Metadata | None:
        try:
            return clean_metadata(data)
        except MetadataRefused as refused:
            raise serializers.ValidationError(str(refused)) from None

    def to_representation(self, value: Any) -> Any:
        return value


class FactIn(serializers.Serializer):
    key = _key_field()
    value = _value_field()
    op = serializers.ChoiceField(choices=FACT_OPS, required=False)
    version = StrictIntegerField(min_value=1, max_value=BIGINT_MAX, required=False)
    hard_commit = StrictBooleanField(required=False, default=False)
    # Why a fact with an explicit op was sent (an agent retracting its own update): recorded
    # on the operation like the reason of a reviewer's action.
    reason = StrictCharField(required=False, allow_blank=True, max_length=2000)
    metadata = MetadataField(
        required=False, allow_null=True,
        help_text="A flat object of strings, numbers and booleans kept with the version this "
                  "fact creates (at most 32 entries, 4 kB); reads filter by it.")

    def validate_key(self, key: str) -> str:
        problem = key_problem(key)
        if problem:
            raise serializers.ValidationError(problem)
        return key

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        return _check_op_args(attrs)


class ObservationIn(serializers.Serializer):
    text = StrictCharField(required=False, allow_blank=True, trim_whitespace=False,
                                 max_length=settings.PMEM_MAX_TEXT_CHARS)
    # many=True builds a ListSerializer, which takes max_length; the stubs type the call as
    # FactIn's own constructor.
    facts = FactIn(many=True, required=False,
                   max_length=settings.PMEM_MAX_FACTS)  # type: ignore[call-arg]
    # Declared fields named like a Field attribute (source, label, context) are collected
    # into the serializer's fields all the same; the stubs see them as that attribute.
    source = StrictCharField(required=False, allow_blank=True,
                             max_length=200)  # type: ignore[assignment]
    observed_at = InstantField(required=False, allow_null=True)
    idempotency_key = StrictCharField(required=False, max_length=200)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not (attrs.get("text") or "").strip() and not attrs.get("facts"):
            raise serializers.ValidationError({"text": "give text and/or facts"})
        return attrs



class OperationSummaryOut(serializers.Serializer):
    op = serializers.CharField()
    requested = serializers.CharField(help_text="the op asked for (op: what happened)")
    key = serializers.CharField()
    value = serializers.CharField(allow_null=True)
    version = serializers.IntegerField(allow_null=True)
    ordinal = serializers.IntegerField(
        allow_null=True, required=False,
        help_text="the version's position in its key's history (the explorer's vN)")
    status = serializers.CharField(allow_null=True)
    reason = serializers.CharField()
    actor = serializers.CharField()
    method = serializers.CharField()
    source = serializers.CharField(allow_blank=True)  # type: ignore[assignment]


class DroppedFactOut(serializers.Serializer):
    key = serializers.CharField(allow_blank=True)
    value = serializers.CharField(allow_blank=True)
    reason = serializers.CharField()


class ExtractionOut(serializers.Serializer):
    extractor = serializers.CharField(allow_null=True)
    raw = serializers.CharField(allow_blank=True, help_text="the model's answer as received")
    error = serializers.CharField(allow_null=True)
    dropped = DroppedFactOut(many=True, help_text="facts a model extracted that were refused "
                                                  "before anything was written")


class ObservationOut(serializers.Serializer):
    id = serializers.IntegerField()
    seq = serializers.IntegerField()
    status = serializers.ChoiceField(choices=[state.value for state in EvidenceState])
    error = serializers.CharField(allow_blank=True)
    operations = OperationSummaryOut(many=True, required=False)
    extraction = ExtractionOut(allow_null=True, required=False)
    facts_found = serializers.IntegerField(
        allow_null=True, required=False,
        help_text="How many facts the observation yielded (null before extraction).")
    note = serializers.CharField(
        allow_blank=True, required=False,
        help_text="Said in words when a committed observation yielded no fact.")
    replayed = serializers.BooleanField(
        required=False,
        help_text="True when the idempotency_key was used before with the same request: "
                  "this is the first observation, nothing new was stored.")


class ErrorOut(serializers.Serializer):
    error = serializers.CharField()
    field = serializers.CharField(required=False, help_text="the input at fault")
    observation = serializers.IntegerField(
        required=False, help_text="409 of a reused idempotency_key: the first observation")


class MentionOut(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["cell", "operation", "evidence"])
    id = serializers.IntegerField()
    key = serializers.CharField(required=False)


class EraseReportOut(serializers.Serializer):
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


class CellOpIn(serializers.Serializer):
    op = serializers.ChoiceField(choices=OPS)
    value = _value_field()
    version = StrictIntegerField(min_value=1, max_value=BIGINT_MAX, required=False)
    reason = StrictCharField(required=False, allow_blank=True, max_length=2000)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        return _check_op_args(attrs)


class VersionOut(serializers.Serializer):
    version = serializers.IntegerField()
    value = serializers.CharField()
    status = serializers.CharField()
    valid_from = serializers.DateTimeField()
    valid_to = serializers.DateTimeField(allow_null=True)
    ordinal = serializers.IntegerField(required=False, help_text="1-based position in the key's history")
    metadata = MetadataField(
        allow_null=True, required=False,
        help_text="the metadata the fact that created the version carried (null: none)")


class AlternativeOut(serializers.Serializer):
    version = serializers.IntegerField()
    value = serializers.CharField()
    support = serializers.IntegerField()
    ordinal = serializers.IntegerField(
        allow_null=True, required=False,
        help_text="the version's position in its key's history (the explorer's vN)")
    metadata = MetadataField(
        allow_null=True, required=False,
        help_text="the metadata the fact that created the version carried (null: none)")


class CellOut(serializers.Serializer):
    key = serializers.CharField()
    value = serializers.CharField(allow_null=True)
    status = serializers.ChoiceField(choices=[status.value for status in CellStatus])
    version = serializers.IntegerField(allow_null=True)
    ordinal = serializers.IntegerField(
        allow_null=True, required=False,
        help_text="the version's position in its key's history (the explorer's vN)")
    metadata = MetadataField(
        allow_null=True, required=False,
        help_text="the metadata the fact that created the version carried (null: none)")
    support = serializers.IntegerField()
    alternatives = AlternativeOut(many=True)
    history = VersionOut(many=True, help_text="at most `history` entries, newest first")
    history_total = serializers.IntegerField(required=False)
    history_next = serializers.CharField(allow_null=True, required=False,
                                         help_text="cursor: GET …/history/?before=<it>")
    aliases = serializers.ListField(child=serializers.CharField())
    as_of = serializers.DateTimeField(required=False)
    created_at = serializers.DateTimeField(required=False,
                                           help_text="when the key was first written")
    updated_at = serializers.DateTimeField(
        required=False, help_text="when its current value last changed (not as of a time)")


class HistoryPageOut(serializers.Serializer):
    results = VersionOut(many=True)
    next = serializers.CharField(allow_null=True, help_text="cursor for `before`")
    next_url = serializers.CharField(allow_null=True)
    total = serializers.IntegerField()
    total_capped = serializers.BooleanField(required=False)
    as_of = serializers.DateTimeField(required=False)


class TimelineBinOut(serializers.Serializer):
    bucket = serializers.IntegerField()
    counts = serializers.DictField(child=serializers.IntegerField())
    first_ordinal = serializers.IntegerField()
    last_ordinal = serializers.IntegerField()
    first_version = serializers.IntegerField()
    last_version = serializers.IntegerField()
    to = serializers.DateTimeField(allow_null=True)


class TimelineOut(serializers.Serializer):
    key = serializers.CharField()
    total = serializers.IntegerField()
    start = serializers.DateTimeField(allow_null=True)
    end = serializers.DateTimeField(allow_null=True)
    buckets = serializers.IntegerField()
    bins = TimelineBinOut(many=True)


class GraphWindowOut(serializers.Serializer):
    versions = serializers.IntegerField()
    older = serializers.IntegerField()
    newer = serializers.IntegerField()
    first = serializers.IntegerField(allow_null=True)
    last = serializers.IntegerField(allow_null=True)
    total = serializers.IntegerField()
    around = serializers.IntegerField(allow_null=True)


class CellSummaryOut(serializers.Serializer):
    key = serializers.CharField()
    value = serializers.CharField(allow_null=True)
    status = serializers.CharField()
    version = serializers.IntegerField(allow_null=True)
    support = serializers.IntegerField()
    updated_at = serializers.DateTimeField()


class CellListOut(serializers.Serializer):
    results = CellOut(many=True)
    next = serializers.CharField(allow_null=True)


class CellOpOut(serializers.Serializer):
    operation = serializers.DictField()
    cell = CellOut(allow_null=True)


class GraphNodeOut(serializers.Serializer):
    id = serializers.CharField()
    kind = serializers.ChoiceField(choices=["evidence", "version", "operation", "tombstone"])
    label = serializers.CharField()  # type: ignore[assignment]  # a declared field (above)
    status = serializers.CharField(required=False)
    # Versions: their own metadata; versions and operations: the version's ordinal.
    version = serializers.IntegerField(required=False, allow_null=True)
    ordinal = serializers.IntegerField(
        allow_null=True, required=False,
        help_text="the version's position in its key's history (the explorer's vN)")
    metadata = MetadataField(
        allow_null=True, required=False,
        help_text="the metadata the fact that created the version carried (null: none)")
    # Evidence: the head of its text and where the whole observation is (decision 21).
    observation = serializers.IntegerField(required=False)
    text = serializers.CharField(required=False, allow_blank=True)
    text_chars = serializers.IntegerField(required=False)
    text_truncated = serializers.BooleanField(required=False)
    observation_url = serializers.URLField(required=False)
    # Operation: the observation it came from (its node holds the text, once).
    evidence = serializers.IntegerField(required=False, allow_null=True)


class GraphEdgeOut(serializers.Serializer):
    source = serializers.CharField()  # type: ignore[assignment]  # a declared field (above)
    target = serializers.CharField()
    type = serializers.ChoiceField(choices=["supported_by", "supersedes", "alternative_of",
                                            "revokes", "restores"])


class GraphOut(serializers.Serializer):
    key = serializers.CharField()
    nodes = GraphNodeOut(many=True)
    edges = GraphEdgeOut(many=True)
    window = GraphWindowOut(required=False)
    head = serializers.IntegerField(allow_null=True, required=False)
    as_of = serializers.DateTimeField(required=False)


class OperationOut(serializers.Serializer):
    id = serializers.IntegerField()
    op = serializers.CharField()
    requested = serializers.CharField()
    key = serializers.CharField()
    value = serializers.CharField(allow_null=True)
    version = serializers.IntegerField(allow_null=True)
    ordinal = serializers.IntegerField(
        allow_null=True, required=False,
        help_text="the version's position in its key's history (the explorer's vN)")
    actor = serializers.CharField(help_text="Who asked: api:<token>, mcp:<token>, user:<name>, "
                                            "system")
    method = serializers.CharField(help_text="How it was decided: explicit, rule, model, "
                                             "identity, reinstate")
    source = serializers.CharField(  # type: ignore[assignment]  # a field, not Field.source
        allow_blank=True, help_text="The evidence's source")
    reason = serializers.CharField()
    seq = serializers.IntegerField(allow_null=True)
    observation = serializers.IntegerField(allow_null=True)
    created_at = serializers.DateTimeField()
    raw_output = serializers.CharField(allow_blank=True)


class OperationListOut(serializers.Serializer):
    results = OperationOut(many=True)
    next = serializers.CharField(allow_null=True)


class ReadIn(serializers.Serializer):
    query = StrictCharField(max_length=4000)
    mode = serializers.ChoiceField(choices=list(READ_MODES), default="frontier")
    k = StrictIntegerField(min_value=1, max_value=settings.PMEM_MAX_K, required=False)
    disclose = serializers.ListField(child=serializers.ChoiceField(choices=DISCLOSURES),
                                     required=False, default=list, max_length=len(DISCLOSURES))
    gate = StrictBooleanField(required=False, default=False)
    as_of = StrictCharField(required=False, max_length=64,
                            help_text="ISO-8601 time with a zone: read memory as it was then")
    filter = MetadataField(
        required=False, allow_null=True,
        help_text="frontier mode: only facts whose current version's metadata holds each of "
                  "these entries (equality)")
    min_score = StrictFloatField(
        required=False, allow_null=True, min_value=-1.0, max_value=1.0,
        help_text="drop items whose score (cosine similarity of the query and the item, -1 to "
                  "1) is below this")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("filter") and attrs.get("mode", "frontier") != "frontier":
            raise serializers.ValidationError(
                {"filter": "metadata belongs to facts: filter reads in mode frontier"})
        return attrs


class ReadOut(serializers.Serializer):
    mode = serializers.CharField()
    context = serializers.CharField(allow_blank=True)  # type: ignore[assignment]  # see source
    items = serializers.ListField(child=serializers.DictField())
    context_chars = serializers.IntegerField()
    note = serializers.CharField(required=False)


class AnswerIn(ReadIn):
    mode = serializers.ChoiceField(choices=list(ANSWER_MODES), default="frontier")
    as_of = None  # type: ignore[assignment]  # the answer step reads the present only
    filter = None  # type: ignore[assignment]  # nor filters its reads
    min_score = None  # type: ignore[assignment]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        return attrs


class AnswerOut(serializers.Serializer):
    answer = serializers.CharField(allow_blank=True)
    mode = serializers.CharField()
    context = serializers.CharField(allow_blank=True)  # type: ignore[assignment]  # see source
    context_chars = serializers.IntegerField()
    lookups = serializers.ListField(child=serializers.DictField())


class WhoAmIOut(serializers.Serializer):
    namespace = serializers.CharField(
        allow_null=True, help_text="the namespace the token reaches (null: an application "
                                   "token, which reaches those of namespace_prefix)")
    namespace_prefix = serializers.CharField(
        allow_null=True, required=False,
        help_text="an application token's: it reaches every namespace whose name starts with "
                  "this, and its first write to one creates it")
    scope = serializers.ChoiceField(choices=[s.value for s in Scope])
    client = serializers.CharField(help_text="operations are signed api:<client>")
    name = serializers.CharField()
    prefix = serializers.CharField(help_text="the token's first characters (the rest is secret)")
    expires_at = serializers.DateTimeField(allow_null=True)
    sources = serializers.ListField(
        child=serializers.CharField(),
        help_text="the trusted sources a write token may name (any source without a trust "
                  "level too); one alone is the source of writes that name none")
