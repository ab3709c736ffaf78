"""The change feed's answers (SPEC §12): an event, and a page of them with the URL of the next."""

from __future__ import annotations

from rest_framework import serializers

from .render import Out


class ChangeVersionOut(Out):
    version = serializers.IntegerField()
    ordinal = serializers.IntegerField(allow_null=True)
    value = serializers.CharField()


class ChangeEventOut(Out):
    """One committed operation as the change feed serves it (SPEC §12)."""
    cursor = serializers.IntegerField(help_text="orders the namespace's events in commit order")
    op = serializers.CharField(help_text="the operation: accept, contest, reject, revoke, "
                                         "resolve, restore, noop, reinstate, expire, erase")
    key = serializers.CharField(allow_blank=True, help_text="an erase event's key is blank "
                                                            "after the retention")
    version = serializers.IntegerField(allow_null=True, help_text="the version made or touched")
    ordinal = serializers.IntegerField(allow_null=True)
    value = serializers.CharField(allow_null=True)
    previous = ChangeVersionOut(allow_null=True, help_text="the head it displaced")
    status = serializers.CharField(allow_blank=True, help_text="the version's status after it")
    cell_status = serializers.CharField(help_text="active, contested or empty, after it")
    actor = serializers.CharField(allow_blank=True)
    method = serializers.CharField(allow_blank=True)
    source = serializers.CharField(  # type: ignore[assignment]  # a field, not Field.source
        allow_blank=True, help_text="the observation's source")
    reason = serializers.CharField(allow_blank=True)
    observation = serializers.IntegerField(allow_null=True)
    committed_at = serializers.DateTimeField()
    head = ChangeVersionOut(allow_null=True, help_text="the cell's head after it (replaying "
                                                       "the feed rebuilds the frontier)")


class ChangeListOut(Out):
    results = ChangeEventOut(many=True)
    next = serializers.CharField(help_text="the URL of the events after these (also when there "
                                           "are none yet: ask it again, or with wait)")
