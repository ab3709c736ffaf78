"""Input shapes of the HTTP API: validation only, no logic, no writes. (What it answers is in
:mod:`memory.api.outputs`.)"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from memory.domain import (
    BIGINT_MAX,
    DISCLOSURES,
    OBSERVATION_OPS,
    VALUE_OPS,
    OpType,
    conversation,
)
from memory.domain.admission import Refused, check_key, check_observation
from memory.domain.instants import TimeRefused, parse_instant
from memory.domain.metadata import Metadata, MetadataRefused, clean_metadata
from memory.reads import ANSWER_MODES, READ_MODES
from memory.services.admission import limits
from memory.services.ordinals import parse_ordinal


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


@extend_schema_field({"oneOf": [
    {"type": "integer", "minimum": 1, "maximum": BIGINT_MAX},
    {"type": "string", "pattern": "^v[1-9][0-9]*$"}]})
class VersionField(serializers.Field):
    """A version as a client names it (SPEC §11.5): its id (a JSON integer) or the key's own
    ordinal as ``"v3"``."""

    default_error_messages = {  # noqa: RUF012  (DRF's own attribute, read-only)
        "invalid": "a version id (an integer of at least 1) or the key's ordinal as \"v3\""}

    def to_internal_value(self, data: Any) -> int | str:
        if isinstance(data, str) and parse_ordinal(data) is not None:
            return data
        if isinstance(data, bool) or not isinstance(data, int) or not 1 <= data <= BIGINT_MAX:
            self.fail("invalid")
        return data

    def to_representation(self, value: Any) -> Any:
        return value


class InstantField(serializers.DateTimeField):
    """A JSON string read by the one parser of times (:mod:`memory.domain.instants`): UTC out,
    a refusal naming the field for what PostgreSQL could not hold, or for a time without a
    zone (ambiguous: CONTRACT "Input that is refused")."""

    def to_internal_value(self, value: Any) -> datetime:
        if not isinstance(value, str):
            self.fail("invalid", format="an ISO-8601 string")
        try:
            moment = parse_instant(value, field=self.field_name or "time")
        except TimeRefused as refused:
            raise serializers.ValidationError(refused.message) from None
        if moment is None:
            self.fail("invalid", format="an ISO-8601 string")
        return moment


class ZonedInstantField(InstantField):
    """An instant that must carry its zone (``expires_at``): without one it is refused."""

    def to_internal_value(self, value: Any) -> datetime:
        if not isinstance(value, str):
            self.fail("invalid", format="an ISO-8601 string with a zone")
        try:
            moment = parse_instant(value, field=self.field_name or "time")
        except TimeRefused as refused:
            raise serializers.ValidationError(refused.message) from None
        if moment is None:
            self.fail("invalid", format="an ISO-8601 string with a zone")
        return moment


#: The longest ``ttl`` a fact may carry: ten years, in seconds (SPEC §13).
TTL_MAX = 10 * 366 * 24 * 3600


class StrictBooleanField(serializers.BooleanField):
    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


#: What the cell-operations endpoint takes (``restore`` included) ...
OPS = [o.value for o in OpType]
#: ... and what a fact of an observation may carry (``restore`` is a person's, SPEC §3).
FACT_OPS = [o.value for o in OBSERVATION_OPS]


def _key_field() -> serializers.CharField:
    return StrictCharField(max_length=settings.PMEM_MAX_KEY_CHARS)


def key_problem(key: str) -> str | None:
    """Why ``key`` cannot name a cell (SPEC §1), or None: nothing left once normalised, or
    longer than the store holds (NFKC can expand a character: U+FDFA is 18 letters). The
    importer asks the same (memory.domain.admission)."""
    try:
        check_key(key, limits())
    except Refused as refused:
        return refused.message
    return None


def admitted(check: Any, **kwargs: Any) -> None:
    """Run a check of memory.domain.admission, the importer's too, as a 400 naming the field."""
    try:
        check(limits=limits(), **kwargs)
    except Refused as refused:
        raise serializers.ValidationError({refused.field: refused.message}) from None


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


class StrictFloatField(serializers.FloatField):
    """A JSON number: not a string of digits, not a boolean."""

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        return super().to_internal_value(data)


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
    version = VersionField(required=False)
    hard_commit = StrictBooleanField(required=False, default=False)
    annotate = StrictBooleanField(
        required=False, default=False,
        help_text="True: the model (when one is configured) decides the operation relative "
                  "to the current value, as for text. Left out, a value that differs from the "
                  "current one supersedes it and an equal one supports it.")
    # Why a fact with an explicit op was sent (an agent retracting its own update): recorded
    # on the operation like the reason of a reviewer's action.
    reason = StrictCharField(required=False, allow_blank=True, max_length=2000)
    metadata = MetadataField(
        required=False, allow_null=True,
        help_text="A flat object of strings, numbers and booleans kept with the version this "
                  "fact creates (at most 32 entries, 4 kB); reads filter by it.")

    ttl = StrictIntegerField(
        min_value=1, max_value=TTL_MAX, required=False,
        help_text="seconds (1 to 10 years): the version this fact creates is never current "
                  "after that long from when the observation was received (SPEC §13)")
    expires_at = ZonedInstantField(
        required=False,
        help_text="an ISO-8601 time with a zone: the version this fact creates is never "
                  "current from then on (SPEC §13)")

    def validate_key(self, key: str) -> str:
        problem = key_problem(key)
        if problem:
            raise serializers.ValidationError(problem)
        return key

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "ttl" in attrs and "expires_at" in attrs:
            raise serializers.ValidationError({"ttl": "give ttl or expires_at, not both"})
        if ("ttl" in attrs or "expires_at" in attrs) and not attrs.get("value"):
            field = "ttl" if "ttl" in attrs else "expires_at"
            raise serializers.ValidationError({field: "only a fact with a value expires"})
        return _check_op_args(attrs)


class ZonedTimeText(StrictCharField):
    """An ISO-8601 time that names its zone (``Z`` or an offset): stored as the instant in
    UTC (``2023-05-08T13:56:00Z``). A time without a zone is refused: a conversation's
    clock is not the server's."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_length=64, **kwargs)

    def to_internal_value(self, data: Any) -> str:
        text = super().to_internal_value(data)
        try:
            moment = parse_instant(text, field=self.field_name or "at")
        except TimeRefused as refused:
            raise serializers.ValidationError(refused.message) from None
        if moment is None:
            self.fail("blank")
        return conversation.instant_text(moment)


class MessageIn(serializers.Serializer):
    """One turn of a chat session."""

    role = StrictCharField(max_length=conversation.MAX_ROLE_CHARS,
                           help_text="user, assistant, system, tool, …")
    content = StrictCharField(trim_whitespace=False, max_length=settings.PMEM_MAX_TEXT_CHARS)
    name = StrictCharField(required=False, max_length=conversation.MAX_NAME_CHARS,
                           help_text="the speaker, shown in the transcript instead of the role")
    at = ZonedTimeText(required=False,
                           help_text="when it was said: ISO 8601 with a zone (Z or an offset)")

    def validate_content(self, content: str) -> str:
        if not content.strip():
            raise serializers.ValidationError("a message needs content")
        return content


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
    messages = MessageIn(
        many=True, required=False, allow_empty=False,
        max_length=conversation.MAX_MESSAGES,  # type: ignore[call-arg]
        help_text="A chat session, kept with the observation and read as its text (one line "
                  "per message: [time] speaker: content); observed_at defaults to the last "
                  "message's time.")
    extract = StrictBooleanField(
        required=False, default=False,
        help_text="With facts: true extracts facts from the text too. Left out, text sent with "
                  "facts is their evidence only (kept, shown by raw reads, not extracted).")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if (not (attrs.get("text") or "").strip() and not attrs.get("facts")
                and not attrs.get("messages")):
            raise serializers.ValidationError({"text": "give text, messages and/or facts"})
        if attrs.get("messages"):
            # Kept as validated: only the fields a message may have, and those given.
            attrs["messages"] = [{k: m[k] for k in ("role", "content", "name", "at") if k in m}
                                 for m in attrs["messages"]]
            rendered = conversation.observation_text(attrs.get("text") or "", attrs["messages"])
            if len(rendered) > settings.PMEM_MAX_TEXT_CHARS:
                raise serializers.ValidationError({"messages": (
                    f"the session reads as {len(rendered)} characters of text, over "
                    f"{settings.PMEM_MAX_TEXT_CHARS}: send it as several observations")})
        admitted(check_observation, text=attrs.get("text", ""), facts=attrs.get("facts"),
                 source=attrs.get("source", ""), idempotency_key=attrs.get("idempotency_key"))
        return attrs


class ObservationBatchIn(serializers.Serializer):
    observations = ObservationIn(
        many=True, allow_empty=False,
        max_length=settings.PMEM_MAX_BATCH)  # type: ignore[call-arg]


class CellOpIn(serializers.Serializer):
    op = serializers.ChoiceField(choices=OPS)
    value = _value_field()
    version = VersionField(required=False)
    reason = StrictCharField(required=False, allow_blank=True, max_length=2000)
    metadata = MetadataField(
        required=False, allow_null=True,
        help_text="Entries over the metadata the version this creates starts from (the head it "
                  "displaces, the version it restores); an operation that creates no version "
                  "(resolve, revoke, reject of an alternative, noop) keeps none")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        return _check_op_args(attrs)


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
        help_text="frontier modes: only facts whose current version's metadata holds each of "
                  "these entries (equality)")
    min_score = StrictFloatField(
        required=False, allow_null=True, min_value=-1.0, max_value=2.0,
        help_text="drop items whose score is below this: the score each item carries (in "
                  "frontier the cosine of query and cell plus half the share of the query's "
                  "rare words the cell holds, -1 to 1.5; in evidence the cosine plus the "
                  "share of the query's word weight the observation holds, -1 to 2; otherwise "
                  "the cosine, -1 to 1)")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("filter") and not READ_MODES[attrs.get("mode", "frontier")].spec.reads_cells:
            raise serializers.ValidationError(
                {"filter": "metadata belongs to facts: filter reads in a frontier mode"})
        return attrs


class AnswerIn(ReadIn):
    mode = serializers.ChoiceField(choices=list(ANSWER_MODES), default="frontier")
    as_of = None  # type: ignore[assignment]  # the answer step reads the present only
    filter = None  # type: ignore[assignment]  # nor filters its reads
    min_score = None  # type: ignore[assignment]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        return attrs


