"""A real HTTP server on 127.0.0.1 that receives webhook deliveries (a thread of the test
process), records each one and answers as the test says: 204, an error status, or only after
a delay (a timeout, as the sender sees it)."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    at: float
    status: int

    @property
    def event(self) -> dict[str, Any]:
        return json.loads(self.body)

    @property
    def webhook_id(self) -> str:
        return self.headers["webhook-id"]


@dataclass
class WebhookReceiver:
    """``with WebhookReceiver() as r:`` ... ``r.url``; ``r.answer(500)`` until
    ``r.answer(204)``; ``r.delay(s)`` holds each answer that long."""

    status: int = 204
    hold: float = 0.0
    arrived: int = 0  # requests begun (an answer held back is counted here first)
    received: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> WebhookReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                with receiver.lock:
                    status, hold = receiver.status, receiver.hold
                    receiver.arrived += 1
                if hold:
                    time.sleep(hold)
                with receiver.lock:
                    receiver.received.append(Received(
                        {k.lower(): v for k, v in self.headers.items()}, body, time.time(),
                        status))
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def answer(self, status: int) -> None:
        with self.lock:
            self.status = status

    def delay(self, seconds: float) -> None:
        with self.lock:
            self.hold = seconds

    def delivered(self) -> list[Received]:
        """The requests answered with a 2xx, in arrival order."""
        with self.lock:
            return [r for r in self.received if 200 <= r.status < 300]

    def all(self) -> list[Received]:
        with self.lock:
            return list(self.received)

    def first_seen(self) -> list[Received]:
        """Each webhook id's first 2xx'd delivery, in arrival order (redeliveries dropped, as a
        receiver drops them by id)."""
        seen: dict[str, Received] = {}
        for r in self.delivered():
            seen.setdefault(r.webhook_id, r)
        return list(seen.values())

    def verified(self, secret: str) -> list[dict[str, Any]]:
        """Every 2xx'd delivery checked with the Standard Webhooks verifier (raises when one
        does not verify), as events."""
        hook = Webhook(secret)
        return [hook.verify(r.body, r.headers) for r in self.delivered()]
