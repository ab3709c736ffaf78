"""One exception per kind of answer the P-Mem API can give (CONTRACT "HTTP API").

Every error the client raises is a :class:`PmemError`. An answer of the server is an
:class:`ApiError` carrying its status and JSON body; the subclass says which kind it was, so a
caller catches what it can handle (``except Conflict as refused: refused.reason``).
"""

from __future__ import annotations

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


class PayloadTooLarge(ApiError):
    """413: the body is over the server's limit."""


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
    413: PayloadTooLarge, 429: RateLimited,
}


def error_for(status: int, body: Any, *, retry_after: float | None = None) -> ApiError:
    """The exception for an error answer (``body`` is its parsed JSON, or its text)."""
    message = body.get("error") if isinstance(body, dict) else None
    if not isinstance(message, str) or not message:
        message = (body if isinstance(body, str) and body else f"HTTP {status}")[:500]
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else ApiError)
    if cls is BadRequest:
        field = body.get("field") if isinstance(body, dict) else None
        return BadRequest(message, status=status, body=body,
                          field=field if isinstance(field, str) else None)
    if cls is RateLimited:
        return RateLimited(message, status=status, body=body, retry_after=retry_after)
    return cls(message, status=status, body=body)
