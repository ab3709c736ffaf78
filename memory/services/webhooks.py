"""Webhooks of the change feed (SPEC §12): endpoints made, deleted and resumed, and the
attempts that deliver their events.

The change-event log is the outbox: it is written in each commit's transaction, so an event
that is committed is there to deliver, and one that is not never is. An endpoint keeps a
cursor into it (``delivered``) and its events go out one at a time in cursor order: event
n+1 is not sent before event n has had its 2xx. A failed attempt is stored with the time of the
next one (doubling from ``PMEM_WEBHOOK_RETRY_BASE`` to ``PMEM_WEBHOOK_RETRY_CAP``), so a
restart or a lost broker message loses nothing: beat queues every endpoint that is due
(:func:`webhooks_due`). After ``PMEM_WEBHOOK_PAUSE_AFTER`` seconds of failing in a row the
endpoint is paused until someone resumes it; it then carries on where it stopped.

At-least-once: an attempt whose 2xx is lost (a worker killed after the POST, before the cursor
moved) is made again, with the same ``webhook-id``. Two workers never deliver one endpoint at
once: :func:`webhook_claim` holds a session-level advisory lock for the endpoint (no
transaction stays open over the HTTP call; a killed worker's lock ends with its connection).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from memory import metrics
from memory.domain.webhooks import (
    TargetRefused,
    backoff_seconds,
    clean_ops,
    event_body,
    event_json,
    new_secret,
    signed_headers,
    webhook_id,
)
from memory.models import (
    AuditEntry,
    ChangeCounter,
    Namespace,
    WebhookDelivery,
    WebhookEndpoint,
)
from pmem_site.celery import DELIVERIES_SUFFIX

from .tokens import audit_record
from .webhook_http import Answer, check_url, post

log = logging.getLogger("pmem.webhooks")

_LOCK_CLASS = 0x5057  # "PW": the advisory-lock namespace of webhook deliveries
#: The task that delivers one endpoint's events (memory.tasks), queued by name: services
#: sit below the tasks. It goes to the queue beside the default one that every worker also
#: consumes (pmem_site.celery), so that a wake-up is not queued behind a burst of observations.
DELIVER_TASK = "memory.tasks.deliver_webhook"


def webhook_create(*, namespace: Namespace, url: str, actor: str,
                   ops: list[str] | None = None) -> WebhookEndpoint:
    """A new endpoint for ``namespace``'s events committed from now on. ``TargetRefused`` for
    a URL that may not be called (checked again at every delivery), ``ValueError`` for an
    unknown op."""
    wanted = clean_ops(ops)
    check_url(url, allow_private=settings.PMEM_WEBHOOK_ALLOW_PRIVATE)
    with transaction.atomic():
        # Every event up to the last cursor is committed (cursors are handed out in commit
        # order), so the endpoint starts after exactly what is already there.
        last = (ChangeCounter.objects.filter(namespace=namespace)
                .values_list("last", flat=True).first()) or 0
        endpoint = WebhookEndpoint.objects.create(
            namespace=namespace, url=url.strip(), secret=new_secret(), ops=wanted,
            created_by=actor, delivered=last)
        audit_record(namespace=namespace, actor=actor, action=AuditEntry.Action.WEBHOOK_CREATE,
                     target=f"webhook {endpoint.pk}", detail={"url": endpoint.url, "ops": wanted})
    return endpoint


def webhook_delete(*, endpoint: WebhookEndpoint, actor: str) -> None:
    """Delete the endpoint and its delivery log; nothing more is sent to it."""
    with transaction.atomic():
        audit_record(namespace=endpoint.namespace, actor=actor,
                     action=AuditEntry.Action.WEBHOOK_DELETE, target=f"webhook {endpoint.pk}",
                     detail={"url": endpoint.url})
        endpoint.delete()


def webhook_resume(*, endpoint: WebhookEndpoint, actor: str) -> None:
    """Make a paused (or failing) endpoint due now; it carries on from its cursor."""
    with transaction.atomic():
        WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
            active=True, attempts=0, failing_since=None, next_attempt_at=None)
        audit_record(namespace=endpoint.namespace, actor=actor,
                     action=AuditEntry.Action.WEBHOOK_RESUME, target=f"webhook {endpoint.pk}",
                     detail={"url": endpoint.url})
    webhook_queue(endpoint.pk)


@contextmanager
def webhook_claim(endpoint_id: int) -> Iterator[bool]:
    """Hold the endpoint's delivery lock for the block (yields False when another worker holds
    it: that one delivers). Needs no transaction; must not be entered inside one."""
    with connection.cursor() as cur:
        cur.execute("SELECT pg_try_advisory_lock(%s, %s)", [_LOCK_CLASS, endpoint_id])
        held = bool(cur.fetchone()[0])
    try:
        yield held
    finally:
        if held:
            try:
                with connection.cursor() as cur:
                    cur.execute("SELECT pg_advisory_unlock(%s, %s)", [_LOCK_CLASS, endpoint_id])
            except Exception:  # a lost connection took the lock with it
                connection.close()


def webhook_due(endpoint_id: int) -> WebhookEndpoint | None:
    """The endpoint when it is active and its next attempt is due now."""
    endpoint = (WebhookEndpoint.objects.filter(pk=endpoint_id, active=True)
                .select_related("namespace").first())
    if endpoint is None:
        return None
    if endpoint.next_attempt_at is not None and endpoint.next_attempt_at > timezone.now():
        return None
    return endpoint


# The feed's own read (memory.selectors.changes.events_after), for the one event after a cursor:
# services sit below the selectors (tests/services/test_webhooks.py checks the two agree).
# The next event after ``after`` (memory.selectors.changes.events_after's shape: services sit
# below the selectors; tests/services/test_webhooks.py checks the two agree), with the
# namespace's last cursor read in the same snapshot. Only events up to that cursor are looked
# at: every one of them is committed (cursors are handed out in commit order, under the
# counter's row lock), so none can still appear below it, and passing over up to it (an ops
# filter's events left out) skips nothing.
_NEXT = """
k AS (SELECT COALESCE((SELECT last FROM memory_changecounter
                       WHERE namespace_id = %(ns)s), 0) AS last)
SELECT k.last, n.* FROM k LEFT JOIN LATERAL (
    SELECT c.cursor, c.op, c.key, c.version_id, c.ordinal, c.value, c.previous, c.status,
           c.cell_status, c.actor, c.method, COALESCE(e.source, ''), c.reason,
           c.observation_id, c.committed_at, c.head
      FROM memory_changeevent c LEFT JOIN memory_evidence e ON e.id = c.observation_id
     WHERE c.namespace_id = %(ns)s AND c.cursor > %(after)s AND c.cursor <= k.last
       AND (cardinality(%(ops)s::varchar[]) = 0 OR c.op = ANY(%(ops)s::varchar[]))
     ORDER BY c.cursor
     LIMIT 1) n ON true
"""
# A 2xx recorded and the next event read in ONE statement (one round trip an event): the
# cursor moves (never backwards; not at all when the endpoint was deleted meanwhile), the
# attempt is logged, and the next event is read after it.
_DELIVERED_THEN_NEXT = """
WITH moved AS (
    UPDATE memory_webhookendpoint SET delivered = %(after)s, attempts = 0,
           failing_since = NULL, next_attempt_at = NULL, last_error = ''
     WHERE id = %(id)s AND delivered < %(after)s RETURNING id
), logged AS (
    INSERT INTO memory_webhookdelivery (endpoint_id, cursor, webhook_id, outcome, status_code,
                                        error, seconds, created_at)
    SELECT id, %(after)s, %(msg)s, 'delivered', %(status)s, '', %(seconds)s, now() FROM moved
    RETURNING 1
), """ + _NEXT.replace("SELECT k.last,", "SELECT (SELECT count(*) FROM moved), k.last,", 1)


def _next(endpoint: WebhookEndpoint, sql: str, params: dict[str, Any]) -> dict[str, Any] | None:
    params = {"ns": endpoint.namespace_id, "ops": list(endpoint.ops), **params}
    with connection.cursor() as cur:
        cur.execute(sql, params)
        row = cur.fetchone()
    if sql is _DELIVERED_THEN_NEXT:
        moved, *row = row
        if not moved:  # deleted meanwhile, or another deliverer moved on: stop here
            endpoint.active = False
            return None
        endpoint.delivered, endpoint.attempts, endpoint.failing_since = params["after"], 0, None
    last, *event = row
    if event[0] is None:
        if last > endpoint.delivered:
            WebhookEndpoint.objects.filter(pk=endpoint.pk, delivered__lt=last).update(
                delivered=last)
            endpoint.delivered = last
        return None
    return event_json(tuple(event))


def webhook_next_event(endpoint: WebhookEndpoint) -> dict[str, Any] | None:
    """The next event the endpoint is to receive (the first after its cursor that its ops
    filter wants), in the feed's shape; None when there is none (events its filter leaves out
    are passed over: the cursor moves past them)."""
    return _next(endpoint, "WITH " + _NEXT, {"after": endpoint.delivered})


def webhook_attempt(*, endpoint: WebhookEndpoint, event: dict[str, Any],
                    namespace: str) -> tuple[Answer, dict[str, Any] | None]:
    """POST one event (the next after ``endpoint.delivered``) and log the attempt: on its 2xx
    the cursor moves and the next event is returned with the answer; otherwise the next
    attempt is scheduled. The caller holds :func:`webhook_claim`."""
    cursor = int(event["cursor"])
    msg_id = webhook_id(endpoint.namespace_id, cursor)
    body = event_body({**event, "namespace": namespace})
    headers = signed_headers(endpoint.secret, msg_id, body, timezone.now())
    started = time.monotonic()
    answer = post(endpoint.url, body, headers,
                  allow_private=settings.PMEM_WEBHOOK_ALLOW_PRIVATE,
                  connect_timeout=settings.PMEM_WEBHOOK_CONNECT_TIMEOUT,
                  timeout=settings.PMEM_WEBHOOK_TIMEOUT)
    seconds = time.monotonic() - started
    metrics.WEBHOOK_DELIVERIES.labels(outcome=answer.outcome).inc()
    if answer.ok:
        return answer, _next(endpoint, _DELIVERED_THEN_NEXT, {
            "id": endpoint.pk, "after": cursor, "msg": msg_id, "status": answer.status,
            "seconds": seconds})
    try:
        with transaction.atomic():
            WebhookDelivery.objects.create(
                endpoint_id=endpoint.pk, cursor=cursor, webhook_id=msg_id,
                outcome=answer.outcome, status_code=answer.status, error=answer.error[:500],
                seconds=seconds)
            _failed(endpoint, answer)
    except IntegrityError:  # the endpoint was deleted during the POST: nothing to record
        endpoint.active = False
    return answer, None


def _failed(endpoint: WebhookEndpoint, answer: Answer) -> None:
    now = timezone.now()
    attempts = endpoint.attempts + 1
    since = endpoint.failing_since or now
    wait = backoff_seconds(attempts, base=settings.PMEM_WEBHOOK_RETRY_BASE,
                           cap=settings.PMEM_WEBHOOK_RETRY_CAP)
    paused = (now - since).total_seconds() >= settings.PMEM_WEBHOOK_PAUSE_AFTER
    if paused:
        log.warning("webhook %s paused: failing since %s (%s)", endpoint.pk, since, answer.error)
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
        attempts=attempts, failing_since=since, next_attempt_at=now + timedelta(seconds=wait),
        last_error=answer.error[:500], active=not paused)
    endpoint.attempts, endpoint.failing_since = attempts, since
    endpoint.next_attempt_at, endpoint.active = now + timedelta(seconds=wait), not paused


def webhook_wait(endpoint: WebhookEndpoint) -> float:
    """Seconds until the endpoint's next attempt is due (0: now)."""
    if endpoint.next_attempt_at is None:
        return 0.0
    return max(0.0, (endpoint.next_attempt_at - timezone.now()).total_seconds())


@dataclass(frozen=True)
class Run:
    """What one delivery run came to: ``idle`` (nothing left), ``continued`` (time is up,
    more to deliver), ``not due`` (paused, or waiting for its next attempt), or the outcome
    of the attempt that failed, then ``retry_in``: seconds until the next one is due."""

    outcome: str
    delivered: int = 0
    retry_in: float | None = None


def webhooks_deliver(*, endpoint_id: int, deadline: float | None = None) -> Run:
    """Deliver the endpoint's events after its cursor, one at a time in cursor order, until
    none is left, one fails, or ``time.monotonic()`` passes ``deadline``. The caller holds
    :func:`webhook_claim`."""
    sent = 0
    endpoint = webhook_due(endpoint_id)
    if endpoint is None:
        return Run("not due", sent)
    event = webhook_next_event(endpoint)
    while event is not None:
        answer, event = webhook_attempt(endpoint=endpoint, event=event,
                                        namespace=endpoint.namespace.name)
        if not answer.ok:
            return Run(answer.outcome, sent, webhook_wait(endpoint) if endpoint.active else None)
        sent += 1
        if not endpoint.active:
            return Run("not due", sent)
        if event is not None and deadline is not None and time.monotonic() >= deadline:
            return Run("continued", sent)
    return Run("idle", sent)


def webhooks_due(endpoint_id: int | None = None) -> list[int]:
    """Active endpoints (all, or the one named) whose next attempt is due and that have an
    event to deliver."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT w.id FROM memory_webhookendpoint w WHERE w.active"
            " AND (%s::bigint IS NULL OR w.id = %s::bigint)"
            " AND (w.next_attempt_at IS NULL OR w.next_attempt_at <= now())"
            " AND EXISTS (SELECT 1 FROM memory_changeevent e"
            "  WHERE e.namespace_id = w.namespace_id AND e.cursor > w.delivered"
            "  AND (cardinality(w.ops) = 0 OR e.op = ANY(w.ops)))"
            " ORDER BY w.id", [endpoint_id, endpoint_id])
        return [row[0] for row in cur.fetchall()]


def webhook_queue(endpoint_id: int, countdown: float | None = None) -> bool:
    """Queue the delivery task of one endpoint; a broker that is down loses nothing (beat
    queues every due endpoint again)."""
    try:
        queue = current_app.conf.task_default_queue + DELIVERIES_SUFFIX
        current_app.send_task(DELIVER_TASK, args=[endpoint_id], countdown=countdown,
                              queue=queue, time_limit=None, soft_time_limit=None)
        return True
    except Exception:
        log.warning("could not queue the delivery of webhook %s; beat will", endpoint_id,
                    exc_info=True)
        return False


def webhooks_wake_on_commit(namespace_id: int) -> None:
    """Queue the namespace's endpoints once the surrounding transaction has committed (its
    events are then in the log to deliver)."""
    transaction.on_commit(lambda: _wake(namespace_id))


def _wake(namespace_id: int) -> None:
    try:
        ids = list(WebhookEndpoint.objects.filter(namespace_id=namespace_id, active=True)
                   .values_list("pk", flat=True))
    except Exception:
        log.warning("could not look up the webhooks of namespace %s; beat will", namespace_id,
                    exc_info=True)
        return
    for endpoint_id in ids:
        webhook_queue(endpoint_id)


def webhook_log_prune() -> int:
    """Keep the last ``PMEM_WEBHOOK_LOG_KEEP`` attempts of each endpoint."""
    with connection.cursor() as cur:
        cur.execute(
            "DELETE FROM memory_webhookdelivery d USING ("
            " SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY endpoint_id"
            "  ORDER BY id DESC) AS n FROM memory_webhookdelivery) ranked WHERE n > %s) old"
            " WHERE d.id = old.id", [max(1, settings.PMEM_WEBHOOK_LOG_KEEP)])
        return cur.rowcount


__all__ = ["DELIVER_TASK", "TargetRefused", "webhook_attempt", "webhook_claim", "webhook_create",
           "webhook_delete", "webhook_due", "webhook_log_prune", "webhook_next_event",
           "webhook_queue", "Run", "webhook_resume", "webhook_wait", "webhooks_deliver",
           "webhooks_due",
           "webhooks_wake_on_commit"]
