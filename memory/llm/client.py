"""An OpenAI-compatible client (vLLM) that never raises for model or network faults.

Every call returns a result object carrying either data or a ``failure`` (a typed
:class:`~memory.llm.errors.ModelError`: transport, content, unsupported form), the raw text the
model sent, and token usage. The parts live beside this module, by concern:

- ``transport.py``: one HTTP request under the endpoint's semaphore, retries with backoff;
- ``forms.py``: structured-output negotiation (``FORMS``, ``endpoint_forms``);
- ``salvage.py``: reading a JSON answer tolerantly;
- ``fit.py``: fitting vectors to the columns' dimension;
- ``configured.py``: where a worker process's clients share the host's slots.

:func:`client_from_settings` is the client the settings describe (``PMEM_LLM_*``,
``PMEM_EMBED_*``), or none.

:meth:`ModelClient.probe` asks explicitly, with a tiny request per form, for ``/healthz``,
``make run`` and ``manage.py pmem_model check``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from django.conf import settings

from memory import metrics

from .configured import host_slots_root
from .errors import ContentError, ModelError, TransportError, UnsupportedForm
from .errors import malformed as _malformed
from .errors import unparsable as _unparsable
from .fit import DEFAULT_EMBED_DIM, fit_vector
from .forms import FORMS, endpoint_forms, request_params
from .salvage import parse_json_loose
from .transport import endpoint_semaphore, message_text, sdk_client, usage, with_retries

log = logging.getLogger("pmem.llm")


@dataclass(frozen=True)
class ChatResult:
    """One chat call. ``data`` is the parsed JSON (or stripped text for ``chat_text``), None on
    failure; ``raw`` is the model's text as received (empty when no answer came back)."""

    data: Any | None
    raw: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failure: ModelError | None = None
    attempts: int = 0
    form: str | None = None  # the structured-output form the answer came in (chat_json)
    probes: int = 0  # calls the server refused as an unsupported form before this answer

    @property
    def ok(self) -> bool:
        return self.failure is None


@dataclass(frozen=True)
class EmbedResult:
    """One embeddings call: one unit vector of the client's ``embed_dim`` per input text."""

    vectors: list[list[float]]
    prompt_tokens: int = 0
    failure: ModelError | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None


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


def note_failure(kind: str, failure: ModelError | None) -> None:
    """Count a call that failed for good (``pmem_model_errors_total{kind, reason}``)."""
    if failure is not None:
        metrics.MODEL_ERRORS.labels(kind=kind, reason=failure.reason).inc()


#: How long a call waits for another thread's negotiation of the endpoint's form.
_NEGOTIATION_WAIT_S = 5.0


def _negotiated(client: ModelClient, call: Callable[[], ChatResult]) -> ChatResult:
    """``call`` — once the endpoint's structured-output form is known, or while this thread
    finds it: one thread negotiates while the others wait for what it finds, for a while
    only (a first answer slow in coming must not hold every other call back)."""
    if endpoint_forms.get(client.base_url, client.model) is None and len(client.forms) > 1:
        lock = endpoint_forms.negotiation(client.base_url, client.model)
        held = lock.acquire(timeout=_NEGOTIATION_WAIT_S)
        try:
            if endpoint_forms.get(client.base_url, client.model) is None:  # still unknown
                return call()
        finally:
            if held:
                lock.release()
    return call()


class ModelClient:
    """Chat (JSON-schema constrained or plain text) and embeddings against OpenAI-compatible
    endpoints. ``embed_base_url``/``embed_model`` default to the chat endpoint and model.
    ``kind`` (``extract``, ``identity``, ``annotate``, ``answer``, ``prune``, ...) labels a
    call's latency and errors in the metrics."""

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
        slots_root: Path | None = None,
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
        self._chat = sdk_client(base_url, api_key or "EMPTY", timeout)
        self._embed = (
            self._chat
            if self.embed_base_url == base_url and not embed_api_key
            else sdk_client(self.embed_base_url, embed_api_key or api_key or "EMPTY", timeout)
        )
        # With ``slots_root`` the cap holds for every process of the host together.
        self._chat_sem = endpoint_semaphore(base_url, concurrency, slots_root)
        self._embed_sem = endpoint_semaphore(self.embed_base_url, concurrency, slots_root)

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
        kind: str = "other",
    ) -> ChatResult:
        """One schema-constrained chat call in the endpoint's structured-output form
        (negotiated on the first call, see ``forms.py``). Never raises for model or network
        faults: a failed call or an unparsable answer comes back with ``data=None`` and
        ``failure`` set."""
        result = self._chat_json(messages, schema, schema_name, temperature, max_tokens, kind)
        note_failure(kind, result.failure)
        return result

    def _chat_json(self, messages: list[dict[str, str]], schema: dict[str, Any],
                   schema_name: str, temperature: float, max_tokens: int | None,
                   kind: str) -> ChatResult:
        return _negotiated(self, lambda: self._chat_json_in(
            messages, schema, schema_name, temperature, max_tokens, kind))

    def _chat_json_in(self, messages: list[dict[str, str]], schema: dict[str, Any],
                      schema_name: str, temperature: float, max_tokens: int | None,
                      kind: str) -> ChatResult:
        """One call in the form known for the endpoint, else the forms in order until one is
        taken."""
        known = endpoint_forms.get(self.base_url, self.model)
        order: list[str] = list(self.forms)
        if known is not None and known in self.forms:  # the form found before goes first
            order = [known] + [f for f in self.forms if f != known]
        probes = 0
        for form in order:
            params = request_params(form, messages, schema, schema_name)
            if (max_tokens or self.max_tokens) is not None:
                params["max_tokens"] = max_tokens or self.max_tokens
            result = self._chat_call(structured=form != "prompt", temperature=temperature,
                                     kind=kind, **params)
            if isinstance(result.failure, UnsupportedForm):
                log.warning("%s does not take structured output as %s: %s", self.base_url,
                            form, result.failure)
                endpoint_forms.forget(self.base_url, self.model)
                probes += 1
                continue
            result = replace(result, form=form, probes=probes)
            if result.failure is not None:
                if isinstance(result.failure, TransportError):
                    endpoint_forms.forget(self.base_url, self.model)  # negotiate again next time
                return result
            endpoint_forms.remember(self.base_url, self.model, form)
            try:
                data = parse_json_loose(result.raw)
            except ValueError as exc:
                return replace(result, data=None, failure=_unparsable(str(exc)))
            return replace(result, data=data)
        return replace(result, data=None, probes=probes)  # every form asked was refused

    def probe(self, *, first_only: bool = False) -> dict[str, ModelError | None]:
        """Which structured-output forms the endpoint takes (:func:`probe_forms`)."""
        return probe_forms(self, first_only=first_only)

    @property
    def structured_output(self) -> str | None:
        """The form negotiated for this endpoint in this process, None before (or after a
        failure)."""
        return endpoint_forms.get(self.base_url, self.model)

    def chat_text(self, *, messages: list[dict[str, str]], max_tokens: int = 8,
                  kind: str = "other") -> ChatResult:
        """One short plain-text answer (a single word, say); ``data`` is the stripped text."""
        result = self._chat_call(messages=messages, temperature=0.0, max_tokens=max_tokens,
                                 kind=kind)
        note_failure(kind, result.failure)
        if result.failure is not None:
            return result
        return replace(result, data=result.raw.strip())

    def _chat_call(self, *, structured: bool = False, kind: str = "other",
                   **params: Any) -> ChatResult:
        """One chat completion with retries. ``structured``: the request carries a
        structured-output form, so an error naming it means the form was refused."""
        def call() -> Any:
            return self._chat.chat.completions.create(model=self.model, **params)

        try:
            response, attempts = with_retries(call, self._chat_sem, self.max_retries,
                                              self._backoff, structured, kind)
        except (TransportError, UnsupportedForm) as exc:
            self.counter.add_chat(0, 0)
            return ChatResult(data=None, raw="", failure=exc, attempts=exc.attempts)
        prompt_tokens, completion_tokens = usage(response)
        self.counter.add_chat(prompt_tokens, completion_tokens)
        raw = message_text(response)
        if raw is None:
            return ChatResult(None, "", prompt_tokens, completion_tokens,
                              ContentError("no choices", reason="no_choices"), attempts)
        return ChatResult(None, raw, prompt_tokens, completion_tokens, None, attempts)

    # --- embeddings ----------------------------------------------------------------------

    def embed(self, texts: list[str]) -> EmbedResult:
        """Embed a batch in ONE request. Vectors are truncated or zero-padded to ``embed_dim``
        and L2-normalised. Never raises for model or network faults."""
        result = self._embed_batch(texts)
        note_failure("embed", result.failure)
        return result

    def _embed_batch(self, texts: list[str]) -> EmbedResult:
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
            response, _ = with_retries(call, self._embed_sem, self.max_retries, self._backoff,
                                       kind="embed")
        except (TransportError, UnsupportedForm) as exc:
            self.counter.add_embed(0)
            return EmbedResult(vectors=[], failure=exc)
        prompt_tokens, _ = usage(response)
        self.counter.add_embed(prompt_tokens)
        try:
            rows = sorted(response.data, key=lambda item: item.index)
            vectors = [fit_vector(row.embedding, self.embed_dim) for row in rows]
        except (AttributeError, TypeError, ValueError) as exc:
            return EmbedResult(vectors=[], prompt_tokens=prompt_tokens, failure=_malformed(str(exc)))
        if len(vectors) != len(texts):
            failure = _malformed(f"{len(vectors)} vectors for {len(texts)} texts")
            return EmbedResult(vectors=[], prompt_tokens=prompt_tokens, failure=failure)
        return EmbedResult(vectors=vectors, prompt_tokens=prompt_tokens)


def probe_forms(client: ModelClient, *, first_only: bool = False,
                ) -> dict[str, ModelError | None]:
    """Ask the endpoint, with one tiny request per form, which structured-output forms it
    takes: ``{form: None (taken) or the failure}``. Stops at the first transport failure
    (the remaining forms are reported with that failure), and with ``first_only`` at the
    first form taken (the rest are left out). Remembers the first form taken."""
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}},
              "required": ["ok"], "additionalProperties": False}
    messages = [{"role": "user", "content": 'Answer {"ok": true}'}]
    found: dict[str, ModelError | None] = {}
    for form in FORMS:
        params = request_params(form, messages, schema, "pmem_probe")
        result = client._chat_call(structured=form != "prompt", temperature=0.0,
                               max_tokens=8, kind="probe", **params)
        found[form] = result.failure
        if result.failure is None and first_only and form in client.forms:
            break
        if result.failure is not None and not isinstance(result.failure, UnsupportedForm):
            found.update({f: result.failure for f in FORMS if f not in found})
            break
    first = next((f for f in client.forms if f in found and found[f] is None), None)
    if first is not None:
        endpoint_forms.remember(client.base_url, client.model, first)
    return found


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
    base_url = settings.PMEM_LLM_BASE_URL
    if not base_url or _CHAT_MODEL_OFF.get():
        return None
    options: dict[str, Any] = {
        "base_url": base_url,
        "model": settings.PMEM_LLM_MODEL or "default",
        "api_key": settings.PMEM_LLM_API_KEY or "EMPTY",
        "timeout": settings.PMEM_LLM_TIMEOUT,
        "max_retries": settings.PMEM_LLM_MAX_RETRIES,
        "concurrency": settings.PMEM_LLM_CONCURRENCY,
        "embed_base_url": settings.PMEM_EMBED_BASE_URL or None,
        "embed_model": settings.PMEM_EMBED_MODEL or None,
        "embed_api_key": settings.PMEM_EMBED_API_KEY or None,
        "embed_dim": settings.PMEM_EMBED_DIM,
        "embed_request_dimensions": settings.PMEM_EMBED_REQUEST_DIMENSIONS,
        "structured_output": settings.PMEM_LLM_STRUCTURED_OUTPUT or "auto",
        "max_tokens": settings.PMEM_LLM_MAX_TOKENS or None,
        "slots_root": host_slots_root(),
    }
    options.update(overrides)
    return ModelClient(**options)


__all__ = [
    "FORMS", "CallCounter", "ChatResult", "ContentError", "EmbedResult",
    "ModelClient", "ModelError", "TransportError", "UnsupportedForm", "chat_model_off",
    "client_from_settings", "endpoint_forms", "fit_vector", "note_failure", "parse_json_loose",
]
