"""Why a model call failed, as types: callers decide by class, never by the words of a message.

``str()`` of each is the error text that results, observations and the explorer show (``http
500: …``, ``timeout``, ``unparsable: …``); ``reason`` is a short fixed word for metrics
(``pmem_model_errors_total{reason}``) that never carries a key, a value or a URL.

- :class:`TransportError`: no usable answer arrived at all (a timeout, a refused connection, an
  HTTP error after the retries): trying again later may help.
- :class:`ContentError`: an answer came back but is unusable (unparsable, the wrong schema, no
  choices, malformed vectors): the model would most likely say it again.
- :class:`UnsupportedForm`: the server does not take the request's structured-output form.
"""

from __future__ import annotations

from typing import TypeGuard

#: Prefix of an :class:`UnsupportedForm`'s text (kept for what is shown: ``unsupported format:
#: http 500: …``).
UNSUPPORTED = "unsupported format"


class ModelError(Exception):
    """A model call that failed for good. ``reason``: one word for metrics."""

    reason = "error"

    def __init__(self, message: str, *, reason: str | None = None, attempts: int = 0) -> None:
        super().__init__(message)
        if reason is not None:
            self.reason = reason
        self.attempts = attempts

    @property
    def message(self) -> str:
        return str(self)


class TransportError(ModelError):
    """No usable answer arrived (timeout, connection error, HTTP status after the retries)."""

    reason = "transport"

    def __init__(self, message: str, *, reason: str | None = None, attempts: int = 0,
                 status: int | None = None) -> None:
        super().__init__(message, reason=reason, attempts=attempts)
        self.status = status


class ContentError(ModelError):
    """An answer came back but could not be used (``unparsable``, ``wrong schema``, ...)."""

    reason = "content"


class UnsupportedForm(ModelError):
    """The server refused the request's structured-output form (not retried: asking again in
    the same form cannot help; the client tries the next form)."""

    reason = "unsupported_form"

    def __init__(self, cause: TransportError) -> None:
        super().__init__(f"{UNSUPPORTED}: {cause}", attempts=cause.attempts)
        self.cause = cause


def unparsable(detail: str) -> ContentError:
    return ContentError(f"unparsable: {detail}", reason="unparsable")


def wrong_schema(detail: str) -> ContentError:
    return ContentError(f"wrong schema: {detail}", reason="wrong_schema")


def malformed(detail: str) -> ContentError:
    return ContentError(f"malformed: {detail}", reason="malformed")


def is_transport(failure: ModelError | None) -> TypeGuard[TransportError]:
    """True when no usable answer arrived at all: trying again later may help."""
    return isinstance(failure, TransportError)
