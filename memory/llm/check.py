"""What the configured model endpoints can do: for ``manage.py pmem_model check``, ``make run``,
``/healthz`` and the explorer's index page.

Every check here talks to the endpoints and nothing else (no database). Failures are named by
their cause (:func:`cause_of`), so a newcomer reads "refused connection" or "unknown model
name" instead of a stack trace.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from .client import (
    UNSUPPORTED,
    ModelClient,
    describe_error,
    endpoint_forms,
    is_transport_error,
)
from .extraction import extract_facts

#: The one sentence whose extraction ``pmem_model check`` times.
SENTENCE = "Update: mug 1 has been moved from countertop 1 to cabinet 3."
#: A status probe that failed is not repeated for this long (healthz may be polled often).
PROBE_RETRY_S = 30.0


def cause_of(error: str | None, *, model: str = "") -> str | None:
    """A failed call's cause in words: refused connection, unknown model name, 401, timeout,
    unsupported format, or the error itself."""
    if not error:
        return None
    text = error.lower()
    if text.startswith(UNSUPPORTED):
        return f"unsupported format: {error[len(UNSUPPORTED) + 2:]}"
    if text.startswith("timeout"):
        return "timeout: the server did not answer in time"
    if text.startswith("connection error"):
        return "refused connection: nothing answers at that address"
    if text.startswith("http 401") or text.startswith("http 403"):
        return f"{error[5:8]} unauthorized: check the API key (PMEM_LLM_API_KEY)"
    if text.startswith("http 404") and "model" in text:
        return f"unknown model name {model!r}: {error}"
    if text.startswith("http 404"):
        return f"not found: is the base URL right (it usually ends in /v1)? {error}"
    return error


@dataclass
class ChatCheck:
    base_url: str
    model: str
    served: list[str] = field(default_factory=list)  # what GET /models lists
    forms: dict[str, str | None] = field(default_factory=dict)  # form -> None (taken) or error
    structured_output: str | None = None
    extraction_s: float | None = None
    extraction_facts: list[tuple[str, str]] = field(default_factory=list)
    extraction_error: str | None = None
    cause: str | None = None  # set when the endpoint cannot serve extraction

    @property
    def ok(self) -> bool:
        return self.cause is None


@dataclass
class EmbedCheck:
    base_url: str
    model: str
    dim: int | None = None
    seconds: float | None = None
    cause: str | None = None

    @property
    def ok(self) -> bool:
        return self.cause is None


def served_models(client: ModelClient) -> tuple[list[str], str | None]:
    """The model ids ``GET /models`` lists, or the error."""
    try:
        return [m.id for m in client._chat.models.list().data], None
    except Exception as exc:  # any failure is reported, never raised
        return [], describe_error(exc)


def _telling_error(found: dict[str, str | None], forms: tuple[str, ...]) -> str | None:
    """The error that says why no form was taken: a failure other than a refused form (the
    server did not answer) wins over the refusals that preceded it."""
    errors = [found[f] for f in forms if found.get(f)]
    return next((e for e in errors if e and not e.startswith(UNSUPPORTED)),
                errors[0] if errors else None)


def check_chat(client: ModelClient) -> ChatCheck:
    """Probe every structured-output form, then time one one-sentence extraction."""
    found = ChatCheck(base_url=client.base_url, model=client.model)
    found.served, _ = served_models(client)
    found.forms = client.probe()
    found.structured_output = next((f for f in client.forms if found.forms.get(f) is None),
                                   None)
    if found.structured_output is None:
        first = _telling_error(found.forms, client.forms)
        found.cause = cause_of(first, model=client.model)
        if found.served and client.model not in found.served and first \
                and not first.startswith(UNSUPPORTED):
            found.cause = f"unknown model name {client.model!r} (served: " \
                          f"{', '.join(found.served)}): {first}"
        return found
    started = time.monotonic()
    result = extract_facts(client, SENTENCE)
    found.extraction_s = time.monotonic() - started
    found.extraction_facts = [(f.key, f.value) for f in result.facts]
    found.extraction_error = result.error
    if result.error is not None and is_transport_error(result.error):
        found.cause = cause_of(result.error, model=client.model)
    return found


def check_embeddings(client: ModelClient) -> EmbedCheck:
    """One embedding of one sentence: the size the server returns, before fitting."""
    found = EmbedCheck(base_url=client.embed_base_url, model=client.embed_model)
    started = time.monotonic()
    try:
        response = client._embed.embeddings.create(model=client.embed_model, input=[SENTENCE],
                                                   encoding_format="float")
        found.dim = len(response.data[0].embedding)
    except Exception as exc:  # reported by cause, never raised
        found.cause = cause_of(describe_error(exc), model=client.embed_model)
    found.seconds = time.monotonic() - started
    return found


# --- the status shown by /healthz and the explorer ---------------------------------------------

_LAST_PROBE: dict[tuple[str, str], tuple[float, str | None]] = {}
_PROBE_LOCK = threading.Lock()


def model_status(client: ModelClient | None) -> dict[str, Any] | None:
    """``{"name", "structured_output"}`` (plus ``error`` when the endpoint failed) for the
    configured chat model, None without one. The form is the one this process negotiated;
    if none yet, one probe is made (at most once per ``PROBE_RETRY_S`` while it fails)."""
    if client is None:
        return None
    form = endpoint_forms.get(client.base_url, client.model)
    status: dict[str, Any] = {"name": client.model, "structured_output": form}
    if form is not None:
        return status
    key = (client.base_url, client.model)
    with _PROBE_LOCK:
        last = _LAST_PROBE.get(key)
        due = last is None or time.monotonic() - last[0] >= PROBE_RETRY_S
        if due:
            _LAST_PROBE[key] = (time.monotonic(), None)
    if due:
        forms = client.probe(first_only=True)
        form = next((f for f in client.forms if forms.get(f) is None), None)
        error = None if form else cause_of(_telling_error(forms, client.forms),
                                           model=client.model)
        with _PROBE_LOCK:
            _LAST_PROBE[key] = (time.monotonic(), error)
    else:
        form, error = endpoint_forms.get(client.base_url, client.model), last[1] if last else None
    status["structured_output"] = form
    if form is None and error:
        status["error"] = error
    return status


def forget_status() -> None:
    """Forget when the endpoints were last probed (tests)."""
    with _PROBE_LOCK:
        _LAST_PROBE.clear()


def embed_client_from_settings(**overrides: Any) -> ModelClient | None:
    """A client of the configured embeddings endpoint (``PMEM_EMBED_*``), None when the local
    embedder is used."""
    from django.conf import settings

    base_url = getattr(settings, "PMEM_EMBED_BASE_URL", "") or ""
    if not base_url:
        return None
    options: dict[str, Any] = {
        "base_url": base_url, "model": getattr(settings, "PMEM_EMBED_MODEL", "") or "default",
        "api_key": getattr(settings, "PMEM_EMBED_API_KEY", "") or "EMPTY",
        "timeout": float(getattr(settings, "PMEM_LLM_TIMEOUT", 60.0)), "max_retries": 0}
    options.update(overrides)
    return ModelClient(**options)
