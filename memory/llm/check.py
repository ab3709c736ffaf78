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

from .client import ModelClient
from .errors import ModelError, TransportError, UnsupportedForm, is_transport
from .extraction import extract_facts
from .forms import endpoint_forms
from .transport import transport_error

#: The one sentence whose extraction ``pmem_model check`` times.
SENTENCE = "Update: mug 1 has been moved from countertop 1 to cabinet 3."
#: A status probe that failed is not repeated for this long (healthz may be polled often).
PROBE_RETRY_S = 30.0


def cause_of(failure: ModelError | None, *, model: str = "") -> str | None:
    """A failed call's cause in words: refused connection, unknown model name, 401, timeout,
    unsupported format, or the error itself."""
    if failure is None:
        return None
    error = str(failure)
    if isinstance(failure, UnsupportedForm):
        return f"unsupported format: {failure.cause}"
    if not isinstance(failure, TransportError):
        return error
    if failure.reason == "timeout":
        return "timeout: the server did not answer in time"
    if failure.reason == "connection":
        return "refused connection: nothing answers at that address"
    if failure.status in (401, 403):
        return f"{failure.status} unauthorized: check the API key (PMEM_LLM_API_KEY)"
    if failure.status == 404 and "model" in error.lower():
        return f"unknown model name {model!r}: {error}"
    if failure.status == 404:
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
        return [], str(transport_error(exc))


def _telling_error(found: dict[str, ModelError | None],
                   forms: tuple[str, ...]) -> ModelError | None:
    """The failure that says why no form was taken: one other than a refused form (the
    server did not answer) wins over the refusals that preceded it."""
    errors = [e for f in forms if (e := found.get(f)) is not None]
    return next((e for e in errors if not isinstance(e, UnsupportedForm)),
                errors[0] if errors else None)


def check_chat(client: ModelClient) -> ChatCheck:
    """Probe every structured-output form, then time one one-sentence extraction."""
    found = ChatCheck(base_url=client.base_url, model=client.model)
    found.served, _ = served_models(client)
    probed = client.probe()
    found.forms = {form: None if e is None else str(e) for form, e in probed.items()}
    found.structured_output = next((f for f in client.forms
                                    if f in probed and probed[f] is None), None)
    if found.structured_output is None:
        first = _telling_error(probed, client.forms)
        found.cause = cause_of(first, model=client.model)
        if found.served and client.model not in found.served and first is not None \
                and not isinstance(first, UnsupportedForm):
            found.cause = f"unknown model name {client.model!r} (served: " \
                          f"{', '.join(found.served)}): {first}"
        return found
    started = time.monotonic()
    result = extract_facts(client, SENTENCE)
    found.extraction_s = time.monotonic() - started
    found.extraction_facts = [(f.key, f.value) for f in result.facts]
    found.extraction_error = None if result.failure is None else str(result.failure)
    if is_transport(result.failure):
        found.cause = cause_of(result.failure, model=client.model)
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
        found.cause = cause_of(transport_error(exc), model=client.embed_model)
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
        form = next((f for f in client.forms if f in forms and forms[f] is None), None)
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

    base_url = settings.PMEM_EMBED_BASE_URL
    if not base_url:
        return None
    options: dict[str, Any] = {
        "base_url": base_url, "model": settings.PMEM_EMBED_MODEL or "default",
        "api_key": settings.PMEM_EMBED_API_KEY or "EMPTY",
        "timeout": settings.PMEM_LLM_TIMEOUT, "max_retries": 0}
    options.update(overrides)
    return ModelClient(**options)
