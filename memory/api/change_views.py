"""The change feed over HTTP (SPEC §12, CONTRACT "Change events"): pages of events after a
cursor, a long poll woken by the commit's notice, and server-sent events on the same URL.

A stream holds a web thread while it is open, and the web server has few (gunicorn gthread:
workers x threads). So a stream is bounded twice (docs/decisions.md, "The change feed"):
it ends after ``PMEM_CHANGES_STREAM_SECONDS`` (the ``retry:`` hint it opens with says how
soon to come back), and the client resumes with ``Last-Event-ID``; and at most
``PMEM_CHANGES_STREAMS`` streams per process stay open at once (long polls, ``wait``,
count too) — a subscriber over that gets what is there now and a longer ``retry:`` (a long
poll: an answer at once), and holds no thread until it comes back. Every other endpoint
keeps its threads.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, renderers
from rest_framework.request import Request
from rest_framework.response import Response

from memory.domain import BIGINT_MAX
from memory.domain.changes import PAGE_DEFAULT, PAGE_MAX, WAIT_MAX
from memory.selectors.changes import NamespaceWatch, events_after, events_waiting

from . import change_outputs as c
from .base import NamespaceView
from .params import bounded_int, digits, next_url
from .permissions import ReadScope
from .views import REFUSALS

EVENT_STREAM = "text/event-stream"
#: How long a client waits before it reconnects: after a stream's end, and (longer) when the
#: process had no stream free for it.
RETRY_MS = 500
RETRY_BUSY_MS = 3000


class EventStreamRenderer(renderers.BaseRenderer):
    """Lets a request that accepts only ``text/event-stream`` through content negotiation (a
    refusal is answered as JSON: :meth:`ChangesView.finalize_response`)."""

    media_type = EVENT_STREAM
    format = "sse"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None,
               renderer_context: Any = None) -> bytes:
        return json.dumps(data).encode()


class _Slots:
    """The process's open streams, at most ``PMEM_CHANGES_STREAMS``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.open = 0

    def take(self) -> bool:
        with self._lock:
            if self.open >= settings.PMEM_CHANGES_STREAMS:
                return False
            self.open += 1
            return True

    def give(self) -> None:
        with self._lock:
            self.open -= 1


SLOTS = _Slots()


def _cursor(raw: str | None, name: str) -> int | None:
    if raw is None or raw == "":
        return None
    value = digits(raw.strip())
    if value is None or value > BIGINT_MAX:
        raise exceptions.ValidationError({name: "a cursor (a non-negative integer)"})
    return value


def _frame(event: dict[str, Any]) -> str:
    return (f"id: {event['cursor']}\nevent: change\n"
            f"data: {json.dumps(event, separators=(',', ':'))}\n\n")


class ChangesView(NamespaceView):
    scopes = {"GET": ReadScope}
    renderer_classes = [renderers.JSONRenderer, EventStreamRenderer]

    def finalize_response(self, request: Request, response: Any, *args: Any,
                          **kwargs: Any) -> Any:
        """A refusal of a stream's request is JSON, as every other refusal of the API."""
        response = super().finalize_response(request, response, *args, **kwargs)
        if isinstance(response, Response) and isinstance(response.accepted_renderer,
                                                         EventStreamRenderer):
            response.accepted_renderer = renderers.JSONRenderer()
            response.accepted_media_type = "application/json"
        return response

    @extend_schema(
        responses={**REFUSALS, 200: c.ChangeListOut},
        summary="The change feed: every committed operation, in commit order",
        operation_id="changes_list",
        description="With `Accept: text/event-stream`: server-sent events (`id: <cursor>`, "
                    "`event: change`, `data: <event>`), resuming after `Last-Event-ID` or "
                    "`after`; a comment line keeps an idle stream open; the stream ends "
                    "after a while with a `retry:` hint, and the client resumes.",
        parameters=[
            OpenApiParameter("after", int, description="the cursor to start after; none: "
                                                       "from the oldest event kept"),
            OpenApiParameter("limit", int, description=f"1 to {PAGE_MAX} (default "
                                                       f"{PAGE_DEFAULT})"),
            OpenApiParameter("wait", int, description=f"seconds, 0 to {WAIT_MAX}: wait for "
                                                      "the next event when none is after "
                                                      "the cursor")],
    )
    def get(self, request: Request, ns: str) -> Any:
        namespace = self.namespace(request, ns)
        params = request.query_params
        after = _cursor(params.get("after"), "after")
        limit = bounded_int(params, "limit", default=PAGE_DEFAULT, low=1, high=PAGE_MAX)
        wait = bounded_int(params, "wait", default=0, low=0, high=WAIT_MAX)
        if EVENT_STREAM in request.META.get("HTTP_ACCEPT", ""):
            resume = _cursor(request.META.get("HTTP_LAST_EVENT_ID"), "Last-Event-ID")
            return _stream(namespace.pk, namespace.name,
                           resume if resume is not None else after)
        # A long poll holds a thread as a stream does, and shares the streams' slots: over
        # the cap it is answered at once (the clients ask again after a pause).
        held = wait > 0 and SLOTS.take()
        try:
            events = events_waiting(namespace.pk, after, limit, float(wait) if held else 0.0,
                                    name=namespace.name)
        finally:
            if held:
                SLOTS.give()
        last = events[-1]["cursor"] if events else (after or 0)
        return Response({"results": events, "next": next_url(request, after=last)})


def _stream(namespace_id: int, name: str, after: int | None) -> StreamingHttpResponse:
    held = SLOTS.take()
    body = _events(namespace_id, name, after, held) if held else _busy(namespace_id, after)
    response = StreamingHttpResponse(body, content_type=f"{EVENT_STREAM}; charset=utf-8")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # a proxy in front must not hold the frames back
    return response


def _busy(namespace_id: int, after: int | None) -> Iterator[str]:
    """No stream free in this process: what is there now, and come back later."""
    yield f"retry: {RETRY_BUSY_MS}\n\n"
    for event in events_after(namespace_id, after, PAGE_MAX):
        yield _frame(event)


def _events(namespace_id: int, name: str, after: int | None, held: bool) -> Iterator[str]:
    """The stream: every event after ``after`` as it commits (woken by the commit's notice),
    a comment after each idle ``PMEM_CHANGES_KEEPALIVE`` seconds, until the stream's time is
    up. Gives its slot back however it ends (a client gone closes the generator)."""
    end = time.monotonic() + settings.PMEM_CHANGES_STREAM_SECONDS
    watch = NamespaceWatch(namespace_id, name)
    try:
        yield f"retry: {RETRY_MS}\n\n"
        while True:
            events = events_after(watch.current(), after, PAGE_MAX)
            for event in events:
                yield _frame(event)
            if events:
                after = events[-1]["cursor"]
                continue
            left = end - time.monotonic()
            if left <= 0:
                return
            if not watch.wait(min(left, settings.PMEM_CHANGES_KEEPALIVE)):
                yield ": keep-alive\n\n"
    finally:
        watch.close()
        if held:
            SLOTS.give()
