"""An OpenAI-compatible client (vLLM) that never raises for model or network faults.

Every call returns a result object carrying either data or an ``error`` string, the raw text
the model sent, and token usage. Retries are ours (the SDK's are disabled) so that the policy is
explicit: exponential backoff on 429, 5xx, connection errors and timeouts, honouring
``Retry-After``. Concurrency is capped per endpoint by a semaphore shared by every client in the
process, so many Celery threads cannot overload one vLLM server.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import numpy as np
import openai

log = logging.getLogger("pmem.llm")

T = TypeVar("T")

DEFAULT_EMBED_DIM = 384
_RETRY_AFTER_CAP_S = 60.0


@dataclass(frozen=True)
class ChatResult:
    """One chat call. ``data`` is the parsed JSON (or stripped text for ``chat_text``), None on
    error; ``raw`` is the model's text as received (empty when no answer came back)."""

    data: Any | None
    raw: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None
    attempts: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class EmbedResult:
    """One embeddings call: one unit vector of the client's ``embed_dim`` per input text."""

    vectors: list[list[float]]
    prompt_tokens: int = 0
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class CallCounter:
    """Thread-safe running totals of calls and tokens for one client."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.chat_calls = 0
        self.embed_calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0

    def add_chat(self, prompt_tokens: int, completion_tokens: int) -> None:
        with self._lock:
            self.chat_calls += 1
            self.prompt_tokens += prompt_tokens
            self.completion_tokens += completion_tokens

    def add_embed(self, prompt_tokens: int) -> None:
        with self._lock:
            self.embed_calls += 1
            self.prompt_tokens += prompt_tokens

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return {
                "chat_calls": self.chat_calls,
                "embed_calls": self.embed_calls,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
            }


# One semaphore per endpoint for the whole process: the cap protects the server, not a client.
_SEMAPHORES: dict[tuple[str, int], threading.BoundedSemaphore] = {}
_SEMAPHORES_LOCK = threading.Lock()


def endpoint_semaphore(base_url: str, concurrency: int) -> threading.BoundedSemaphore:
    """The process-wide semaphore of clients of ``base_url`` with this cap: every client
    built from the settings shares one. Keyed by the cap too, so a client asking for another
    cap (or a new server on a reused port, in tests) never inherits a stale size."""
    key = (base_url.rstrip("/"), max(1, concurrency))
    with _SEMAPHORES_LOCK:
        sem = _SEMAPHORES.get(key)
        if sem is None:
            sem = _SEMAPHORES[key] = threading.BoundedSemaphore(key[1])
        return sem


class _Failure(Exception):
    """A call that failed for good; ``str()`` is the error reported in the result."""

    def __init__(self, error: str, attempts: int) -> None:
        super().__init__(error)
        self.attempts = attempts


class ModelClient:
    """Chat (JSON-schema constrained or plain text) and embeddings against OpenAI-compatible
    endpoints. ``embed_base_url``/``embed_model`` default to the chat endpoint and model."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str = "EMPTY",
        timeout: float = 60.0,
        max_retries: int = 3,
        concurrency: int = 4,
        embed_base_url: str | None = None,
        embed_model: str | None = None,
        embed_api_key: str | None = None,
        embed_dim: int = DEFAULT_EMBED_DIM,
        embed_request_dimensions: bool = False,
        backoff_base: float = 0.5,
        backoff_cap: float = 8.0,
    ) -> None:
        self.base_url = base_url
        self.model = model
        self.max_retries = max(0, max_retries)
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.embed_base_url = embed_base_url or base_url
        self.embed_model = embed_model or model
        self.embed_dim = embed_dim
        self.embed_request_dimensions = embed_request_dimensions
        self.counter = CallCounter()
        self._chat = openai.OpenAI(
            base_url=base_url, api_key=api_key or "EMPTY", timeout=timeout, max_retries=0
        )
        self._embed = (
            self._chat
            if self.embed_base_url == base_url and not embed_api_key
            else openai.OpenAI(
                base_url=self.embed_base_url,
                api_key=embed_api_key or api_key or "EMPTY",
                timeout=timeout,
                max_retries=0,
            )
        )
        self._chat_sem = endpoint_semaphore(base_url, concurrency)
        self._embed_sem = endpoint_semaphore(self.embed_base_url, concurrency)

    # --- chat ---------------------------------------------------------------------------

    def chat_json(
        self,
        *,
        messages: list[dict[str, str]],
        schema: dict[str, Any],
        schema_name: str,
        temperature: float = 0.0,
    ) -> ChatResult:
        """One schema-constrained chat call. Never raises for model or network faults: a failed
        call or an unparsable answer comes back with ``data=None`` and ``error`` set."""
        response_format = {
            "type": "json_schema",
            "json_schema": {"name": schema_name, "schema": schema, "strict": True},
        }
        result = self._chat_call(
            messages=messages, temperature=temperature, response_format=response_format
        )
        if result.error is not None:
            return result
        try:
            data = parse_json_loose(result.raw)
        except ValueError as exc:
            return replace(result, data=None, error=f"unparsable: {exc}")
        return replace(result, data=data)

    def chat_text(self, *, messages: list[dict[str, str]], max_tokens: int = 8) -> ChatResult:
        """One short plain-text answer (a single word, say); ``data`` is the stripped text."""
        result = self._chat_call(messages=messages, temperature=0.0, max_tokens=max_tokens)
        if result.error is not None:
            return result
        return replace(result, data=result.raw.strip())

    def _chat_call(self, **params: Any) -> ChatResult:
        def call() -> Any:
            return self._chat.chat.completions.create(model=self.model, **params)

        try:
            response, attempts = self._with_retries(call, self._chat_sem)
        except _Failure as exc:
            self.counter.add_chat(0, 0)
            return ChatResult(data=None, raw="", error=str(exc), attempts=exc.attempts)
        prompt_tokens, completion_tokens = _usage(response)
        self.counter.add_chat(prompt_tokens, completion_tokens)
        raw = _message_text(response)
        if raw is None:
            return ChatResult(None, "", prompt_tokens, completion_tokens, "no choices", attempts)
        return ChatResult(None, raw, prompt_tokens, completion_tokens, None, attempts)

    # --- embeddings ----------------------------------------------------------------------

    def embed(self, texts: list[str]) -> EmbedResult:
        """Embed a batch in ONE request. Vectors are truncated or zero-padded to ``embed_dim``
        and L2-normalised. Never raises for model or network faults."""
        if not texts:
            return EmbedResult(vectors=[])
        extra: dict[str, Any] = {}
        if self.embed_request_dimensions:
            extra["dimensions"] = self.embed_dim

        def call() -> Any:
            return self._embed.embeddings.create(
                model=self.embed_model, input=list(texts), encoding_format="float", **extra
            )

        try:
            response, _ = self._with_retries(call, self._embed_sem)
        except _Failure as exc:
            self.counter.add_embed(0)
            return EmbedResult(vectors=[], error=str(exc))
        prompt_tokens, _ = _usage(response)
        self.counter.add_embed(prompt_tokens)
        try:
            rows = sorted(response.data, key=lambda item: item.index)
            vectors = [fit_vector(row.embedding, self.embed_dim) for row in rows]
        except (AttributeError, TypeError, ValueError) as exc:
            return EmbedResult(vectors=[], prompt_tokens=prompt_tokens, error=f"malformed: {exc}")
        if len(vectors) != len(texts):
            error = f"malformed: {len(vectors)} vectors for {len(texts)} texts"
            return EmbedResult(vectors=[], prompt_tokens=prompt_tokens, error=error)
        return EmbedResult(vectors=vectors, prompt_tokens=prompt_tokens)

    # --- retry policy -----------------------------------------------------------------------

    def _with_retries(
        self, call: Callable[[], T], semaphore: threading.BoundedSemaphore
    ) -> tuple[T, int]:
        """Run ``call`` under the endpoint semaphore, retrying transient faults.

        Returns (response, attempts). Raises :class:`_Failure` (with ``attempts``) once retries
        are exhausted or on a fault that retrying cannot fix (400, 401, 404, ...). The
        semaphore is held only during a request, never while backing off.
        """
        attempt = 0
        while True:
            attempt += 1
            try:
                with semaphore:
                    return call(), attempt
            except openai.APIStatusError as exc:
                error, retryable = f"http {exc.status_code}: {_short(exc)}", _retryable(exc)
                delay = _retry_after(exc)
            except openai.APITimeoutError:
                error, retryable, delay = "timeout", True, None
            except openai.APIConnectionError as exc:
                error, retryable, delay = f"connection error: {_short(exc)}", True, None
            except (openai.OpenAIError, ValueError, TypeError) as exc:
                error, retryable, delay = f"{type(exc).__name__}: {_short(exc)}", False, None
            if not retryable or attempt > self.max_retries:
                log.warning("model call failed after %d attempt(s): %s", attempt, error)
                raise _Failure(error, attempt)
            time.sleep(self._backoff(attempt) if delay is None else delay)

    def _backoff(self, attempt: int) -> float:
        return float(min(self.backoff_cap, self.backoff_base * 2 ** (attempt - 1)))


# --- helpers ---------------------------------------------------------------------------------


#: Error prefixes of an answer that came back but was unusable (see ``is_transport_error``).
CONTENT_ERROR_PREFIXES = ("unparsable", "no choices", "wrong schema", "malformed")


def is_transport_error(error: str | None) -> bool:
    """True when no usable answer arrived at all (timeout, connection error, HTTP status after
    the retries): trying again later may help. False for no error, and for an answer that came
    back but was unusable (unparsable, wrong schema): the model would most likely say it again."""
    return bool(error) and not str(error).startswith(CONTENT_ERROR_PREFIXES)


def _short(exc: Exception, limit: int = 200) -> str:
    return str(exc).replace("\n", " ")[:limit]


def _retryable(exc: openai.APIStatusError) -> bool:
    return exc.status_code == 429 or exc.status_code >= 500


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


def _usage(response: Any) -> tuple[int, int]:
    usage = getattr(response, "usage", None)
    prompt = getattr(usage, "prompt_tokens", 0) or 0
    completion = getattr(usage, "completion_tokens", 0) or 0
    return int(prompt), int(completion)


def _message_text(response: Any) -> str | None:
    """The first choice's text ('' when the model sent none); None when there is no choice."""
    try:
        message = response.choices[0].message
    except (AttributeError, IndexError, TypeError):
        return None
    return getattr(message, "content", None) or ""


_FENCE = re.compile(r"^\s*```[\w-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)


def parse_json_loose(raw: str) -> Any:
    """Parse a model's JSON answer: strip ``<think>`` blocks and code fences, try the whole
    text, then the first ``{...}`` or ``[...]`` block in it. Raises ValueError if none parses."""
    text = _THINK.sub("", raw).strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    if not text:
        raise ValueError("empty answer")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    decoder = json.JSONDecoder()
    starts = sorted(i for i in (text.find("{"), text.find("[")) if i >= 0)
    for start in starts:
        try:
            return decoder.raw_decode(text, start)[0]
        except json.JSONDecodeError:
            continue
    raise ValueError(f"no JSON value in {text[:80]!r}")


def fit_vector(values: Any, dim: int) -> list[float]:
    """Truncate or zero-pad to ``dim`` and L2-normalise (a zero vector stays zero)."""
    vec = np.zeros(dim, dtype=np.float64)
    arr = np.asarray(values, dtype=np.float64).ravel()[:dim]
    vec[: arr.size] = arr
    norm = float(np.linalg.norm(vec))
    if norm > 0:
        vec /= norm
    return [float(x) for x in vec]


def client_from_settings() -> ModelClient | None:
    """A client configured from Django settings (``PMEM_LLM_*``, ``PMEM_EMBED_*``), or None
    when ``PMEM_LLM_BASE_URL`` is empty (no model configured)."""
    from django.conf import settings

    base_url = getattr(settings, "PMEM_LLM_BASE_URL", "") or ""
    if not base_url:
        return None
    return ModelClient(
        base_url=base_url,
        model=getattr(settings, "PMEM_LLM_MODEL", "") or "default",
        api_key=getattr(settings, "PMEM_LLM_API_KEY", "") or "EMPTY",
        timeout=float(getattr(settings, "PMEM_LLM_TIMEOUT", 60.0)),
        max_retries=int(getattr(settings, "PMEM_LLM_MAX_RETRIES", 3)),
        concurrency=int(getattr(settings, "PMEM_LLM_CONCURRENCY", 4)),
        embed_base_url=getattr(settings, "PMEM_EMBED_BASE_URL", "") or None,
        embed_model=getattr(settings, "PMEM_EMBED_MODEL", "") or None,
        embed_api_key=getattr(settings, "PMEM_EMBED_API_KEY", "") or None,
        embed_dim=int(getattr(settings, "PMEM_EMBED_DIM", DEFAULT_EMBED_DIM)),
        embed_request_dimensions=bool(getattr(settings, "PMEM_EMBED_REQUEST_DIMENSIONS", False)),
    )
