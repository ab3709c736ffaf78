"""A namespace's webhook endpoints as the command and the explorer show them: each with its
state, its cursor against the namespace's last event, and its last delivery attempts."""

from __future__ import annotations

from typing import Any

from memory.models import Namespace, WebhookDelivery, WebhookEndpoint

from .changes import last_cursor


def webhook_row(endpoint: WebhookEndpoint, last: int | None = None) -> dict[str, Any]:
    """One endpoint without its secret (shown once, when it is made)."""
    last = last if last is not None else last_cursor(endpoint.namespace_id)
    return {
        "id": endpoint.pk, "namespace": endpoint.namespace.name, "url": endpoint.url,
        "ops": list(endpoint.ops), "active": endpoint.active, "delivered": endpoint.delivered,
        "behind": max(0, last - endpoint.delivered),  # events after its cursor (any op)
        "attempts": endpoint.attempts, "failing_since": endpoint.failing_since,
        "next_attempt_at": endpoint.next_attempt_at, "last_error": endpoint.last_error,
        "created_by": endpoint.created_by, "created_at": endpoint.created_at,
    }


def webhook_rows(*, namespace: Namespace) -> list[dict[str, Any]]:
    last = last_cursor(namespace.pk)
    return [webhook_row(e, last) for e in
            WebhookEndpoint.objects.filter(namespace=namespace).select_related("namespace")
            .order_by("id")]


def webhook_get(*, namespace: Namespace, endpoint_id: int) -> WebhookEndpoint | None:
    return (WebhookEndpoint.objects.filter(namespace=namespace, pk=endpoint_id)
            .select_related("namespace").first())


def webhook_find(endpoint_id: int) -> WebhookEndpoint | None:
    return WebhookEndpoint.objects.filter(pk=endpoint_id).select_related("namespace").first()


def webhook_deliveries(*, endpoint_id: int, limit: int = 10) -> list[WebhookDelivery]:
    """The endpoint's last delivery attempts, newest first."""
    return list(WebhookDelivery.objects.filter(endpoint_id=endpoint_id).order_by("-id")[:limit])
