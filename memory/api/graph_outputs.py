"""The answers that draw a key's provenance: the graph window (its nodes, one shape per kind) and
the operation log (an operation row, a page of them, an operation with the cell it left); the
other answers are :mod:`memory.api.outputs`'."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field
from rest_framework import serializers

from .outputs import CellOut, expires_at_field
from .render import OneOf, Out
from .serializers import MetadataField

# --- the graph window ---------------------------------------------------------------------------


class VersionNodeOut(Out):
    id = serializers.CharField()
    kind = serializers.ChoiceField(choices=["version"])
    label = serializers.CharField(allow_blank=True)  # type: ignore[assignment]
    status = serializers.CharField()
    version = serializers.IntegerField()
    ordinal = serializers.IntegerField()
    metadata = MetadataField(
        allow_null=True, required=False,
        help_text="the metadata the fact that created the version carried (null: none)")
    expires_at = expires_at_field()
    support = serializers.IntegerField(allow_null=True, help_text="null as of a past time")
    valid_from = serializers.DateTimeField()
    valid_to = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    in_window = serializers.BooleanField()


class EvidenceNodeOut(Out):
    """An observation: the head of its text; the whole is at ``observation_url``."""

    id = serializers.CharField()
    kind = serializers.ChoiceField(choices=["evidence"])
    label = serializers.CharField()  # type: ignore[assignment]
    observation = serializers.IntegerField()
    seq = serializers.IntegerField()
    source = serializers.CharField(allow_blank=True)  # type: ignore[assignment]
    received_at = serializers.DateTimeField()
    text = serializers.CharField(allow_blank=True)
    text_chars = serializers.IntegerField()
    text_truncated = serializers.BooleanField()
    observation_url = serializers.URLField()


class OperationNodeOut(Out):
    """An operation: the observation it came from by id (its node holds the text, once)."""

    id = serializers.CharField()
    kind = serializers.ChoiceField(choices=["operation"])
    label = serializers.CharField()  # type: ignore[assignment]
    op = serializers.CharField()
    requested = serializers.CharField()
    actor = serializers.CharField()
    reason = serializers.CharField(allow_blank=True)
    seq = serializers.IntegerField(allow_null=True)
    version = serializers.IntegerField(allow_null=True)
    ordinal = serializers.IntegerField(
        allow_null=True, required=False,
        help_text="the version's position in its key's history (the explorer's vN)")
    created_at = serializers.DateTimeField()
    evidence = serializers.IntegerField(allow_null=True)
    raw_output = serializers.CharField(allow_blank=True)
    raw_output_chars = serializers.IntegerField()
    raw_output_truncated = serializers.BooleanField()


class TombstoneNodeOut(Out):
    id = serializers.CharField()
    kind = serializers.ChoiceField(choices=["tombstone"])
    label = serializers.CharField()  # type: ignore[assignment]
    operation = serializers.IntegerField()
    created_at = serializers.DateTimeField()


EDGE_TYPES = ["supported_by", "supersedes", "alternative_of", "revokes", "restores"]
_NODES: dict[str, type[Out]] = {"version": VersionNodeOut, "evidence": EvidenceNodeOut,
                                "operation": OperationNodeOut, "tombstone": TombstoneNodeOut}


@extend_schema_field(PolymorphicProxySerializer(
    component_name="GraphNode", serializers=dict[str, Any](_NODES), resource_type_field_name="kind"))
class GraphNodeField(OneOf):
    choices = _NODES

    @classmethod
    def pick(cls, value: Any) -> type[Out]:
        return _NODES[value["kind"]]


class GraphEdgeOut(Out):
    source = serializers.CharField()  # type: ignore[assignment]  # a declared field (above)
    target = serializers.CharField()
    type = serializers.ChoiceField(choices=EDGE_TYPES)


class GraphWindowOut(Out):
    versions = serializers.IntegerField()
    older = serializers.IntegerField()
    newer = serializers.IntegerField()
    first = serializers.IntegerField(allow_null=True)
    last = serializers.IntegerField(allow_null=True)
    total = serializers.IntegerField()
    around = serializers.IntegerField(allow_null=True)


class GraphOut(Out):
    omit = {"as_of": None}

    key = serializers.CharField()
    nodes = serializers.ListField(child=GraphNodeField())
    edges = GraphEdgeOut(many=True)
    window = GraphWindowOut()
    head = serializers.IntegerField(allow_null=True)
    as_of = serializers.DateTimeField(required=False)


# --- the operation log -------------------------------------------------------------------------


class OperationOut(Out):
    """Rendered from the operation row itself."""
    id = serializers.IntegerField()
    op = serializers.CharField(source="type")
    requested = serializers.CharField()
    key = serializers.CharField()
    value = serializers.CharField(allow_null=True)
    version = serializers.IntegerField(source="version_id", allow_null=True)
    ordinal = serializers.IntegerField(
        allow_null=True, required=False,
        help_text="the version's position in its key's history (the explorer's vN)")
    actor = serializers.CharField(help_text="Who asked: api:<token>, mcp:<token>, user:<name>, "
                                            "system")
    method = serializers.CharField(help_text="How it was decided: explicit, client, rule, "
                                             "model, identity, reinstate")
    source = serializers.CharField(  # type: ignore[assignment]  # a field, not Field.source
        allow_blank=True, help_text="The evidence's source")
    reason = serializers.CharField(allow_blank=True)
    seq = serializers.IntegerField(allow_null=True)
    observation = serializers.IntegerField(source="evidence_id", allow_null=True)
    created_at = serializers.DateTimeField()
    raw_output = serializers.CharField(allow_blank=True)
    payload = serializers.JSONField(help_text="the patch as applied and its effects")


class OperationListOut(Out):
    results = OperationOut(many=True)
    next = serializers.CharField(allow_null=True)


class CellOpOut(Out):
    operation = OperationOut()
    cell = CellOut(allow_null=True)
