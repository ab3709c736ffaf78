"""An OpenAI-compatible client (vLLM) that never raises for model or network faults.

Every call returns a result object carrying either data or an ``error`` string, the raw text
the model sent, and token usage. Retries are ours (the SDK's are disabled) so that the policy is
explicit: exponential backoff on 429, 5xx, connection errors and timeouts, honouring
``Retry-After``. Concurrency is capped per endpoint by a semaphore shared by every client in the
process, so many Celery threads cannot overload one vLLM server.

Structured output is negotiated per endpoint (docs/decisions.md, "Structured-output
negotiation"): servers take a JSON schema in different request forms (``FORMS``, tried in that
order). The first schema-constrained call to an endpoint is its own probe: a request the server
rejects as an unsupported form is not retried as transient but sent again at once in the next
form, and the form that worked is remembered for the endpoint, process-wide. A call that fails
for any other reason forgets it, so the next call negotiates again (the server may have been
replaced). :meth:`ModelClient.probe` asks explicitly, with a tiny request per form, for
``/healthz``, ``make run`` and ``manage.py pmem_model check``.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import numpy as np
import openai

log = logging.getLogger("pmem.llm")

T = TypeVar("T")

#: Structured-output request forms, in the order they are tried: OpenAI's ``json_schema``
#: (vLLM, SGLang, LM Studio, llama.cpp's own server, recent Ollama); ``json_object`` with the
#: schema beside it (llama-cpp-python's server); vLLM's ``structured_outputs`` and its older
#: ``guided_json`` body fields; and a plain prompt carrying the schema, parsed tolerantly.
FORMS = ("json_schema", "json_object", "structured_outputs", "guided_json", "prompt")
#: Error prefix of an answer saying the server does not take the request's form.
UNSUPPORTED = "unsupported format"

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
    form: str | None = None  # the structured-output form the answer came in (chat_json)
    probes: int = 0  # calls the server refused as an unsupported form before this answer

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
        structured_output: str = "auto",
        max_tokens: int | None = None,
    ) -> None:
        if structured_output != "auto" and structured_output not in FORMS:
            raise ValueError(f"structured_output must be 'auto' or one of {FORMS}")
        # "auto" negotiates; a pinned form is the only one asked (refused: an error).
        self.forms = FORMS if structured_output == "auto" else (structured_output,)
        # Bounds a schema-constrained answer: a weak model under a grammar may repeat array
        # items until the context is full (minutes on a CPU); what came back whole is salvaged.
        self.max_tokens = max_tokens
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

    def _backoff(self, attempt: int) -> float:
        return float(min(self.backoff_cap, self.backoff_base * 2 ** (attempt - 1)))

    # --- chat ---------------------------------------------------------------------------

    def chat_json(
        self,
        *,
        messages: list[dict[str, str]],
        schema: dict[str, Any],
        schema_name: str,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> ChatResult:
        """One schema-constrained chat call in the endpoint's structured-output form
        (negotiated on the first call, see the module docstring). Never raises for model or
        network faults: a failed call or an unparsable answer comes back with ``data=None``
        and ``error`` set."""
        known = endpoint_forms.get(self.base_url, self.model)
        forms = self.forms
        order: list[str] = list(forms)
        if known is not None and known in forms:  # the form found before goes first
            order = [known] + [f for f in forms if f != known]
        probes = 0
        for form in order:
            params = request_params(form, messages, schema, schema_name)
            if (max_tokens or self.max_tokens) is not None:
                params["max_tokens"] = max_tokens or self.max_tokens
            result = self._chat_call(structured=form != "prompt", temperature=temperature,
                                     **params)
            if result.error is not None and result.error.startswith(UNSUPPORTED):
                log.warning("%s does not take structured output as %s: %s", self.base_url,
                            form, result.error)
                endpoint_forms.forget(self.base_url, self.model)
                probes += 1
                continue
            result = replace(result, form=form, probes=probes)
            if result.error is not None:
                if is_transport_error(result.error):
                    endpoint_forms.forget(self.base_url, self.model)  # negotiate again next time
                return result
            endpoint_forms.remember(self.base_url, self.model, form)
            try:
                data = parse_json_loose(result.raw)
            except ValueError as exc:
                return replace(result, data=None, error=f"unparsable: {exc}")
            return replace(result, data=data)
        return replace(result, data=None, probes=probes)  # every form asked was refused

    def probe(self, *, first_only: bool = False) -> dict[str, str | None]:
        """Ask the endpoint, with one tiny request per form, which structured-output forms it
        takes: ``{form: None (taken) or the error}``. Stops at the first transport failure
        (the remaining forms are reported with that error), and with ``first_only`` at the
        first form taken (the rest are left out). Remembers the first form taken."""
        schema = {"type": "object", "properties": {"ok": {"type": "boolean"}},
                  "required": ["ok"], "additionalProperties": False}
        messages = [{"role": "user", "content": 'Answer {"ok": true}'}]
        found: dict[str, str | None] = {}
        for form in FORMS:
            params = request_params(form, messages, schema, "pmem_probe")
            result = self._chat_call(structured=form != "prompt", temperature=0.0,
                                     max_tokens=8, **params)
            found[form] = result.error
            if result.error is None and first_only and form in self.forms:
                break
            if result.error is not None and not result.error.startswith(UNSUPPORTED):
                found.update({f: result.error for f in FORMS if f not in found})
                break
        first = next((f for f in self.forms if found.get(f) is None), None)
        if first is not None:
            endpoint_forms.remember(self.base_url, self.model, first)
        return found

    @property
    def structured_output(self) -> str | None:
        """The form negotiated for this endpoint in this process, None before (or after a
        failure)."""
        return endpoint_forms.get(self.base_url, self.model)

    def chat_text(self, *, messages: list[dict[str, str]], max_tokens: int = 8) -> ChatResult:
        """One short plain-text answer (a single word, say); ``data`` is the stripped text."""
        result = self._chat_call(messages=messages, temperature=0.0, max_tokens=max_tokens)
        if result.error is not None:
            return result
        return replace(result, data=result.raw.strip())

    def _chat_call(self, *, structured: bool = False, **params: Any) -> ChatResult:
        """One chat completion with retries. ``structured``: the request carries a
        structured-output form, so an error naming it means the form was refused."""
        def call() -> Any:
            return self._chat.chat.completions.create(model=self.model, **params)

        try:
            response, attempts = with_retries(call, self._chat_sem, self.max_retries, self._backoff, structured)
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
            response, _ = with_retries(call, self._embed_sem, self.max_retries, self._backoff)
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

# --- retry policy ---------------------------------------------------------------------------


def with_retries(call: Callable[[], T], semaphore: threading.BoundedSemaphore, max_retries: int,
                 backoff: Callable[[int], float], structured: bool = False) -> tuple[T, int]:
    """Run ``call`` under the endpoint semaphore, retrying transient faults.

    Returns (response, attempts). Raises :class:`_Failure` (with ``attempts``) once retries
    are exhausted or on a fault that retrying cannot fix (400, 401, 404, ...). The
    semaphore is held only during a request, never while backing off. ``structured``: the
    request carries a structured-output form, so an error naming it means the form was
    refused (not retried: asking again cannot help).
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
            if structured and unsupported_form(exc.status_code, str(exc)):
                error, retryable = f"{UNSUPPORTED}: {error}", False
        except openai.APITimeoutError:
            error, retryable, delay = "timeout", True, None
        except openai.APIConnectionError as exc:
            error, retryable, delay = f"connection error: {_short(exc)}", True, None
        except (openai.OpenAIError, ValueError, TypeError) as exc:
            error, retryable, delay = f"{type(exc).__name__}: {_short(exc)}", False, None
        if not retryable or attempt > max_retries:
            log.log(logging.INFO if error.startswith(UNSUPPORTED) else logging.WARNING,
                    "model call failed after %d attempt(s): %s", attempt, error)
            raise _Failure(error, attempt)
        time.sleep(backoff(attempt) if delay is None else delay)


# --- helpers ---------------------------------------------------------------------------------


class EndpointForms:
    """The structured-output form found per (endpoint, model), shared by every client of the
    process: a probe counts as a call, so it is made once per endpoint, not per task."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._forms: dict[tuple[str, str], str] = {}

    def get(self, base_url: str, model: str) -> str | None:
        with self._lock:
            return self._forms.get((base_url.rstrip("/"), model))

    def remember(self, base_url: str, model: str, form: str) -> None:
        with self._lock:
            before = self._forms.get((base_url.rstrip("/"), model))
            self._forms[(base_url.rstrip("/"), model)] = form
        if before != form:
            log.info("structured output for %s (%s): %s", base_url, model, form)

    def forget(self, base_url: str, model: str) -> None:
        with self._lock:
            self._forms.pop((base_url.rstrip("/"), model), None)

    def clear(self) -> None:
        with self._lock:
            self._forms.clear()


endpoint_forms = EndpointForms()

#: Words in an error body that say the request's structured-output form was refused (as
#: opposed to the model, the key or the server failing): llama-cpp-python answers a
#: ``json_schema`` request with HTTP 500 "Input should be 'text' or 'json_object'"; vLLM and
#: pydantic-based servers name the field ("extra_forbidden", "Extra inputs are not permitted").
_FORM_WORDS = ("response_format", "json_schema", "json_object", "structured_outputs",
               "guided_json", "input should be", "extra inputs", "extra_forbidden",
               "unsupported", "not supported", "format")


def unsupported_form(status: int, message: str) -> bool:
    """True when an HTTP error says the request's structured-output form is not taken."""
    if status not in (400, 415, 422, 500, 501):
        return False
    text = message.lower()
    return any(word in text for word in _FORM_WORDS)


def request_params(form: str, messages: list[dict[str, str]], schema: dict[str, Any],
                   schema_name: str) -> dict[str, Any]:
    """The chat-completion parameters that ask for ``schema`` in ``form``."""
    if form == "json_schema":
        return {"messages": messages, "response_format": {
            "type": "json_schema",
            "json_schema": {"name": schema_name, "schema": schema, "strict": True}}}
    if form == "json_object":
        return {"messages": messages,
                "response_format": {"type": "json_object", "schema": schema}}
    if form == "structured_outputs":
        return {"messages": messages, "extra_body": {"structured_outputs": {"json": schema}}}
    if form == "guided_json":
        return {"messages": messages, "extra_body": {"guided_json": schema}}
    if form == "prompt":
        return {"messages": schema_in_prompt(messages, schema)}
    raise ValueError(f"unknown structured-output form {form!r}")


def schema_in_prompt(messages: list[dict[str, str]], schema: dict[str, Any]) -> list[dict[str, str]]:
    """``messages`` with the schema appended to the system message (one is added if none)."""
    note = ("Reply with one JSON object that matches this JSON schema, and nothing else:\n"
            + json.dumps(schema, ensure_ascii=False))
    out = [dict(m) for m in messages]
    for message in out:
        if message.get("role") == "system":
            message["content"] = f"{message.get('content', '')}\n{note}"
            return out
    return [{"role": "system", "content": note}, *out]


#: Error prefixes of an answer that came back but was unusable (see ``is_transport_error``).
CONTENT_ERROR_PREFIXES = ("unparsable", "no choices", "wrong schema", "malformed", UNSUPPORTED)


def is_transport_error(error: str | None) -> bool:
    """True when no usable answer arrived at all (timeout, connection error, HTTP status after
    the retries): trying again later may help. False for no error, for an answer that came
    back but was unusable (unparsable, wrong schema): the model would most likely say it again,
    and for a request form no form of which the server takes."""
    return bool(error) and not str(error).startswith(CONTENT_ERROR_PREFIXES)


def describe_error(exc: Exception) -> str:
    """An SDK exception as the error string results carry (``http 401: ...``, ``timeout``,
    ``connection error: ...``), for calls made outside the retry loop."""
    if isinstance(exc, openai.APIStatusError):
        return f"http {exc.status_code}: {_short(exc)}"
    if isinstance(exc, openai.APITimeoutError):
        return "timeout"
    if isinstance(exc, openai.APIConnectionError):
        return f"connection error: {_short(exc)}"
    return f"{type(exc).__name__}: {_short(exc)}"


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
    text, then the first ``{...}`` or ``[...]`` block in it, or what of it came back whole
    (:func:`salvage_truncated`). Raises ValueError if none parses."""
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
            salvaged = salvage_truncated(text[start:])  # cut off by a length limit?
            if salvaged is not None:
                return salvaged
    raise ValueError(f"no JSON value in {text[:80]!r}")


def salvage_truncated(text: str) -> Any | None:
    """The complete objects of an answer cut off inside its list (a length limit hit):
    ``{"facts": [{...}, {...}, {"key": "ab`` gives ``{"facts": [{...}, {...}]}``, a bare
    ``[{...}, {"k`` the list. None when no complete object precedes the cut. One left-to-right
    pass of the JSON decoder: nothing backtracks."""
    bracket = text.find("[")
    if bracket < 0:
        return None
    head = text[:bracket].strip()
    name = None
    if head:  # '{"facts":' — the one member the list belongs to
        if not (head.startswith("{") and head.endswith(":")):
            return None
        try:
            name = json.loads(head[1:-1].strip())
        except json.JSONDecodeError:
            return None
        if not isinstance(name, str):
            return None
    decoder, items, i = json.JSONDecoder(), [], bracket + 1
    while True:
        while i < len(text) and text[i] in " \t\r\n,":
            i += 1
        if i >= len(text) or text[i] != "{":
            break
        try:
            item, i = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            break
        items.append(item)
    if not items:
        return None
    return items if name is None else {name: items}


def fit_vector(values: Any, dim: int) -> list[float]:
    """Truncate or zero-pad to ``dim`` and L2-normalise (a zero vector stays zero)."""
    vec = np.zeros(dim, dtype=np.float64)
    arr = np.asarray(values, dtype=np.float64).ravel()[:dim]
    vec[: arr.size] = arr
    norm = float(np.linalg.norm(vec))
    if norm > 0:
        vec /= norm
    return [float(x) for x in vec]


_CHAT_MODEL_OFF: ContextVar[bool] = ContextVar("pmem_chat_model_off", default=False)


@contextmanager
def chat_model_off() -> Iterator[None]:
    """Within this block (this thread or task) :func:`client_from_settings` answers None, as
    if no chat model were configured: the demo histories are written this way, so what they
    hold never depends on a model (docs/decisions.md, "The demo never asks a model")."""
    token = _CHAT_MODEL_OFF.set(True)
    try:
        yield
    finally:
        _CHAT_MODEL_OFF.reset(token)


def client_from_settings(**overrides: Any) -> ModelClient | None:
    """A client configured from Django settings (``PMEM_LLM_*``, ``PMEM_EMBED_*``), or None
    when ``PMEM_LLM_BASE_URL`` is empty (no model configured) or inside
    :func:`chat_model_off`. ``overrides`` replace constructor arguments (a health probe's
    short timeout, say)."""
    from django.conf import settings

    base_url = getattr(settings, "PMEM_LLM_BASE_URL", "") or ""
    if not base_url or _CHAT_MODEL_OFF.get():
        return None
    options: dict[str, Any] = {
        "base_url": base_url,
        "model": getattr(settings, "PMEM_LLM_MODEL", "") or "default",
        "api_key": getattr(settings, "PMEM_LLM_API_KEY", "") or "EMPTY",
        "timeout": float(getattr(settings, "PMEM_LLM_TIMEOUT", 60.0)),
        "max_retries": int(getattr(settings, "PMEM_LLM_MAX_RETRIES", 3)),
        "concurrency": int(getattr(settings, "PMEM_LLM_CONCURRENCY", 4)),
        "embed_base_url": getattr(settings, "PMEM_EMBED_BASE_URL", "") or None,
        "embed_model": getattr(settings, "PMEM_EMBED_MODEL", "") or None,
        "embed_api_key": getattr(settings, "PMEM_EMBED_API_KEY", "") or None,
        "embed_dim": int(getattr(settings, "PMEM_EMBED_DIM", DEFAULT_EMBED_DIM)),
        "embed_request_dimensions": bool(getattr(settings, "PMEM_EMBED_REQUEST_DIMENSIONS",
                                                 False)),
        "structured_output": getattr(settings, "PMEM_LLM_STRUCTURED_OUTPUT", "") or "auto",
        "max_tokens": int(getattr(settings, "PMEM_LLM_MAX_TOKENS", 0)) or None,
    }
    options.update(overrides)
    return ModelClient(**options)
