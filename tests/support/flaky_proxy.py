"""A real HTTP server in front of the API that fails some requests on purpose: the network
boundary a client's retries are about (a load balancer's 503, a lost answer, a stall).

``FlakyProxy(upstream)`` forwards every request to ``upstream`` unless a fault is queued:

- ``refuse(status, retry_after=None)``: the next request is answered ``status`` by the proxy
  itself and never reaches the API;
- ``lose_answer(status)``: the next request reaches the API, but its answer is replaced by
  ``status`` (the write happened; the client cannot know);
- ``stall(seconds)``: the next request waits that long before it is forwarded.

``log`` lists ``(monotonic time, method, path, status sent back)`` for every request.
"""

from __future__ import annotations

import http.client
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
              "proxy-authorization", "proxy-authenticate", "host", "content-length"}


@dataclass(frozen=True)
class Fault:
    kind: str  # refuse | lose_answer | stall
    status: int = 503
    retry_after: str | None = None
    seconds: float = 0.0


class FlakyProxy:
    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.faults: list[Fault] = []
        self.log: list[tuple[float, str, str, int]] = []
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                proxy.handle(self)

            do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = False  # close() waits for a stalled request to finish
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FlakyProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    # --- faults ------------------------------------------------------------------------------

    def refuse(self, status: int = 503, retry_after: str | None = None, times: int = 1) -> None:
        with self.lock:
            self.faults += [Fault("refuse", status, retry_after)] * times

    def lose_answer(self, status: int = 503) -> None:
        with self.lock:
            self.faults.append(Fault("lose_answer", status))

    def stall(self, seconds: float) -> None:
        with self.lock:
            self.faults.append(Fault("stall", seconds=seconds))

    def requests(self, method: str | None = None, path_part: str = "") -> list[tuple[float, str, str, int]]:
        return [r for r in self.log if (method is None or r[1] == method) and path_part in r[2]]

    # --- serving -----------------------------------------------------------------------------

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        arrived = time.monotonic()
        body = request.rfile.read(int(request.headers.get("Content-Length") or 0))
        with self.lock:
            fault = self.faults.pop(0) if self.faults else None
        if fault is not None and fault.kind == "refuse":
            self.log.append((arrived, request.command, request.path, fault.status))
            self._answer(request, fault.status, b'{"error": "proxy refused"}',
                         {"Retry-After": fault.retry_after} if fault.retry_after else {})
            return
        if fault is not None and fault.kind == "stall":
            time.sleep(fault.seconds)
        status, headers, content = self._forward(request, body)
        if fault is not None and fault.kind == "lose_answer":
            status, headers, content = fault.status, {}, b'{"error": "answer lost"}'
        # Logged before the answer goes out: the client may look at the log once it has it.
        self.log.append((arrived, request.command, request.path, status))
        try:
            self._answer(request, status, content, headers)
        except OSError:
            pass  # the client gave up waiting (a stall): it is gone

    def _forward(self, request: BaseHTTPRequestHandler,
                 body: bytes) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection(*self.upstream, timeout=120)
        try:
            headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
            headers["Host"] = f"{self.upstream[0]}:{self.upstream[1]}"
            conn.request(request.command, request.path, body=body or None, headers=headers)
            answer = conn.getresponse()
            content = answer.read()
            kept = {k: v for k, v in answer.getheaders() if k.lower() not in HOP_BY_HOP}
            return answer.status, kept, content
        finally:
            conn.close()

    @staticmethod
    def _answer(request: BaseHTTPRequestHandler, status: int, content: bytes,
                headers: dict[str, str]) -> None:
        request.send_response(status)
        for name, value in headers.items():
            if name.lower() != "content-type":
                request.send_header(name, value)
        request.send_header("Content-Type", headers.get("Content-Type", "application/json"))
        request.send_header("Content-Length", str(len(content)))
        request.end_headers()
        request.wfile.write(content)
        request.wfile.flush()
