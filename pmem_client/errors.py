"""One exception per kind of answer the P-Mem API can give (CONTRACT "HTTP API").

Every error the client raises is a :class:`PmemError`. An answer of the server is an
:class:`ApiError` carrying its status and JSON body; the subclass says which kind it was, so a
caller catches what it can handle (``except Conflict as refused: refused.reason``).
"""

from __future__ import annotations

import re
from typing import Any


class PmemError(Exception):
    """Anything that went wrong talking to P-Mem."""


class ApiError(PmemError):
    """The server answered with an error status; ``error`` is its message."""

    def __init__(self, error: str, *, status: int, body: Any = None) -> None:
        super().__init__(f"{status}: {error}")
        self.error = error
        self.status = status
        self.body = body


class BadRequest(ApiError):
    """400: the request was refused as malformed; ``field`` names the input at fault."""

    def __init__(self, error: str, *, status: int = 400, body: Any = None,
                 field: str | None = None) -> None:
        super().__init__(error, status=status, body=body)
        self.field = field


class Unauthorized(ApiError):
    """401: no token, an unknown token, or a revoked one."""


class Forbidden(ApiError):
    """403: the token is valid but its scope does not allow this."""


class NotFound(ApiError):
    """404: no such cell, observation or namespace (another namespace's answers 404 too)."""


class Conflict(ApiError):
    """409, or an explicit operation recorded as invalid (a noop, SPEC §3): ``reason`` says why
    it was refused in the cell's state. ``observation`` is the recorded observation when the
    refusal came back as a committed noop rather than a 409."""

    def __init__(self, error: str, *, status: int = 409, body: Any = None,
                 observation: Any = None) -> None:
        super().__init__(error, status=status, body=body)
        self.reason = error
        self.observation = observation


class IdempotencyConflict(Conflict):
    """409: the idempotency key was used before, in this namespace, for another request.
    Nothing was stored; ``observation_id`` is the observation the key was first used for
    (the same request again would have replayed it, ``Observation.replayed``)."""

    def __init__(self, error: str, *, status: int = 409, body: Any = None,
                 observation_id: int | None = None) -> None:
        super().__init__(error, status=status, body=body)
        self.observation_id = observation_id


class PayloadTooLarge(ApiError):
    """413: the body is over the server's limit."""


class RequestTooLong(ApiError):
    """414 or 431: the request line (a path or query too long) or its headers are over the
    web server's limits."""


class RateLimited(ApiError):
    """429, still refused after the client's retries; ``retry_after`` in seconds, if given."""

    def __init__(self, error: str, *, status: int = 429, body: Any = None,
                 retry_after: float | None = None) -> None:
        super().__init__(error, status=status, body=body)
        self.retry_after = retry_after


class ServerError(ApiError):
    """5xx, still failing after the client's retries."""


class TransportError(PmemError):
    """The server could not be reached, or the connection broke, after the client's retries."""


class Timeout(TransportError):
    """No answer in time, after the client's retries; or an observation still not committed
    when a call that waits for it gave up (``observation`` holds it then)."""

    def __init__(self, message: str, *, observation: Any = None) -> None:
        super().__init__(message)
        self.observation = observation


class ObservationFailed(PmemError):
    """The observation was stored but could not be committed (``observation.error`` says why;
    it stays in the namespace and can be retried by a reviewer)."""

    def __init__(self, observation: Any) -> None:
        super().__init__(f"observation {observation.id} failed: {observation.error}")
        self.observation = observation


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict,
    413: PayloadTooLarge, 414: RequestTooLong, 429: RateLimited, 431: RequestTooLong,
}
_TITLE = re.compile(r"<title>\s*([^<]{1,200}?)\s*</title>", re.IGNORECASE)


def _message(status: int, body: Any) -> str:
    """What the answer says, short: its JSON ``error``; a page's title, never its markup
    (a proxy or web server in front may answer HTML); else its first 500 characters."""
    message = body.get("error") if isinstance(body, dict) else None
    if isinstance(message, str) and message:
        return message
    if isinstance(body, str) and body.strip():
        text = body.strip()
        if text.startswith("<") or "<html" in text[:500].lower():
            title = _TITLE.search(text)
            return f"HTTP {status}" + (f": {title.group(1)}" if title else "")
        return text[:500]
    return f"HTTP {status}"


def error_for(status: int, body: Any, *, retry_after: float | None = None) -> ApiError:
    """The exception for an error answer (``body`` is its parsed JSON, or its text)."""
    message = _message(status, body)
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else ApiError)
    field = body.get("field") if isinstance(body, dict) else None
    if cls is BadRequest:
        return BadRequest(message, status=status, body=body,
                          field=field if isinstance(field, str) else None)
    if cls is Conflict and field == "idempotency_key":
        first = body.get("observation") if isinstance(body, dict) else None
        return IdempotencyConflict(message, status=status, body=body,
                                   observation_id=first if isinstance(first, int) else None)
    if cls is RateLimited:
        return RateLimited(message, status=status, body=body, retry_after=retry_after)
    return cls(message, status=status, body=body)
