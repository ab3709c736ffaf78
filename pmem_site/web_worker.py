"""gunicorn's worker for ``make run``: its threaded worker, answering in JSON what gunicorn
itself refuses before Django sees the request.

A request line or headers over gunicorn's limits, a malformed request line or header: gunicorn
answers these itself, with an HTML page. The API promises JSON errors for every input
(CONTRACT, "Input that is refused"), and clients — the MCP server among them — would pass that
markup on as the error. gunicorn writes every such answer through ``gunicorn.util.write_error``;
this worker replaces that one function, in its own process, with one that writes the same
status as ``{"error": ..., "field": ...}``.

The limits themselves are :data:`LIMITS` (``make run`` passes them): the request line is raised
to gunicorn's maximum so that every request the API validates fits (a 200-character key of
any script percent-encoded, a search as long, a cursor and an ``as_of`` come to under 5 KB).
"""

from __future__ import annotations

import json
from typing import Any

from gunicorn import util
from gunicorn.workers.gthread import ThreadWorker

#: gunicorn's limits, as ``make run`` sets them: the request line at gunicorn's maximum
#: (8190 bytes), headers at its defaults (100 fields of 8190 bytes at most).
LIMITS = {"--limit-request-line": "8190", "--limit-request-fields": "100",
          "--limit-request-field_size": "8190"}

#: Which part of the request each status of gunicorn's own refusals is about.
_FIELDS = {414: "request line", 431: "headers", 400: "request", 403: "request",
           417: "headers", 501: "Transfer-Encoding"}


def json_error_bytes(status: int, reason: str, message: str) -> bytes:
    """The whole HTTP answer gunicorn sends for a request it refuses itself, in JSON."""
    if status >= 500 and not message:
        body: dict[str, Any] = {"error": "internal error; the request was not applied"}
    else:
        body = {"error": f"{reason.lower()}: {message}" if message else reason.lower()}
        if status in _FIELDS:
            body["field"] = _FIELDS[status]
    payload = json.dumps(body).encode()
    head = (f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n")
    return head.encode("latin-1") + payload


def write_json_error(sock: Any, status_int: int, reason: str, mesg: str) -> None:
    """``gunicorn.util.write_error``'s signature and delivery, in JSON."""
    util.write_nonblock(sock, json_error_bytes(status_int, reason, mesg))


class JsonErrorWorker(ThreadWorker):
    """gunicorn's ``gthread`` worker whose own error answers are JSON."""

    def init_process(self) -> None:
        # This process serves P-Mem alone: every error gunicorn writes here is one of ours.
        util.write_error = write_json_error
        super().init_process()
