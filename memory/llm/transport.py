"""HTTP to a model endpoint: one request under the endpoint's semaphore, retried on transient
faults with exponential backoff (honouring ``Retry-After``), every attempt timed by kind.

Retries are ours (the SDK's are disabled) so that the policy is explicit: 429, 5xx, connection
errors and timeouts are retried; any other fault (400, 401, 404, ...) is final. Concurrency is
capped per endpoint by a semaphore shared by every client of the host (``hostslots``: every
process of a worker host together) or, for a client made without a slot directory, of the
process, so many worker threads and processes cannot overload one vLLM server.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import openai

from memory import metrics

from .errors import TransportError, UnsupportedForm
from .forms import unsupported_form
from .hostslots import HostSemaphore, slot_directory
from .quickack import http_client

log = logging.getLogger("pmem.llm")

T = TypeVar("T")
_RETRY_AFTER_CAP_S = 60.0

# One semaphore per endpoint for the whole process: the cap protects the server, not a client.
Semaphore = threading.BoundedSemaphore | HostSemaphore
_SEMAPHORES: dict[tuple[str, int, Path | None], Semaphore] = {}
_SEMAPHORES_LOCK = threading.Lock()


def endpoint_semaphore(base_url: str, concurrency: int,
                       slots_root: Path | None = None) -> Semaphore:
    """The semaphore of clients of ``base_url`` with this cap: with ``slots_root`` (the
    settings' client) one shared by every process of the host, else one per process.
    Keyed by the cap too, so a client asking for another cap (or a new server on a reused
    port, in tests) never inherits a stale size."""
    key = (base_url.rstrip("/"), max(1, concurrency), slots_root)
    with _SEMAPHORES_LOCK:
        sem = _SEMAPHORES.get(key)
        if sem is None:
            sem = _SEMAPHORES[key] = (
                threading.BoundedSemaphore(key[1]) if slots_root is None
                else HostSemaphore(slot_directory(slots_root, key[0], key[1]), key[1]))
        return sem


_SDK_CLIENTS: dict[tuple[int, str, str, float], openai.OpenAI] = {}


def sdk_client(base_url: str, api_key: str, timeout: float) -> openai.OpenAI:
    """The SDK's client of an endpoint, made once per process (its SSL context and
    connection pool take tens of milliseconds to build, and a drain asks for a client at
    every step) and shared: it is thread-safe. Keyed by the process id too: a pool process
    forked from the worker never shares the parent's connections. The SDK's own retries
    are off (:func:`with_retries` is the policy). Its HTTP client acknowledges the server's
    segments at once (:mod:`.quickack`)."""
    key = (os.getpid(), base_url, api_key, timeout)
    with _SEMAPHORES_LOCK:
        client = _SDK_CLIENTS.get(key)
        if client is None:
            client = _SDK_CLIENTS[key] = openai.OpenAI(base_url=base_url, api_key=api_key,
                                                       timeout=timeout, max_retries=0,
                                                       http_client=http_client())
        return client


def with_retries(call: Callable[[], T], semaphore: Semaphore, max_retries: int,
                 backoff: Callable[[int], float], structured: bool = False,
                 kind: str = "other") -> tuple[T, int]:
    """Run ``call`` under the endpoint semaphore, retrying transient faults.

    Returns (response, attempts). Raises :class:`TransportError` (with ``attempts``) once
    retries are exhausted or on a fault that retrying cannot fix (400, 401, 404, ...), and
    :class:`UnsupportedForm` when ``structured`` (the request carries a structured-output
    form) and the error names it: asking again in that form cannot help. The semaphore is
    held only during a request, never while backing off."""
    attempt = 0
    while True:
        attempt += 1
        failure: TransportError | UnsupportedForm
        delay: float | None = None
        try:
            with semaphore, metrics.timed(metrics.MODEL_REQUEST_SECONDS, kind=kind):
                return call(), attempt
        except openai.APIStatusError as exc:
            failure = status_error(exc, attempt)
            delay = _retry_after(exc)
            if structured and unsupported_form(exc.status_code, str(exc)):
                failure = UnsupportedForm(failure)
        except openai.OpenAIError as exc:
            failure = transport_error(exc, attempt)
        except (ValueError, TypeError) as exc:
            failure = TransportError(f"{type(exc).__name__}: {_short(exc)}", reason="client",
                                     attempts=attempt)
        retryable = isinstance(failure, TransportError) and _retryable(failure)
        if not retryable or attempt > max_retries:
            log.log(logging.INFO if isinstance(failure, UnsupportedForm) else logging.WARNING,
                    "model call failed after %d attempt(s): %s", attempt, failure)
            raise failure
        time.sleep(backoff(attempt) if delay is None else delay)


def status_error(exc: openai.APIStatusError, attempts: int = 0) -> TransportError:
    status = exc.status_code
    reason = "http_429" if status == 429 else "http_5xx" if status >= 500 else "http_4xx"
    return TransportError(f"http {status}: {_short(exc)}", reason=reason, attempts=attempts,
                          status=status)


def transport_error(exc: Exception, attempts: int = 0) -> TransportError:
    """An SDK exception as a :class:`TransportError` (``http 401: ...``, ``timeout``,
    ``connection error: ...``), also for calls made outside the retry loop."""
    if isinstance(exc, openai.APIStatusError):
        return status_error(exc, attempts)
    if isinstance(exc, openai.APITimeoutError):
        return TransportError("timeout", reason="timeout", attempts=attempts)
    if isinstance(exc, openai.APIConnectionError):
        return TransportError(f"connection error: {_short(exc)}", reason="connection",
                              attempts=attempts)
    return TransportError(f"{type(exc).__name__}: {_short(exc)}", reason="client",
                          attempts=attempts)


def _retryable(failure: TransportError) -> bool:
    if failure.status is not None:
        return failure.status == 429 or failure.status >= 500
    return failure.reason in ("timeout", "connection")


def _short(exc: Exception, limit: int = 200) -> str:
    return str(exc).replace("\n", " ")[:limit]


def _retry_after(exc: openai.APIStatusError) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds form only), capped."""
    try:
        header = exc.response.headers.get("retry-after")
    except AttributeError:
        return None
    if header is None:
        return None
    try:
        return min(_RETRY_AFTER_CAP_S, max(0.0, float(header)))
    except ValueError:
        return None


def usage(response: Any) -> tuple[int, int]:
    """(prompt tokens, completion tokens) the server reported."""
    used = getattr(response, "usage", None)
    prompt = getattr(used, "prompt_tokens", 0) or 0
    completion = getattr(used, "completion_tokens", 0) or 0
    return int(prompt), int(completion)


def message_text(response: Any) -> str | None:
    """The first choice's text ('' when the model sent none); None when there is no choice."""
    try:
        message = response.choices[0].message
    except (AttributeError, IndexError, TypeError):
        return None
    return getattr(message, "content", None) or ""
