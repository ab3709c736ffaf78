"""The change feed's tables (SPEC §12): the event log each commit writes in its own
transaction, the per-namespace cursor counter, and the webhooks that deliver the log (their
outbox is the log itself: an endpoint keeps only a cursor into it)."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q

from .access import Namespace


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
