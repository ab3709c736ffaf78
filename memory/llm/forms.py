"""Structured-output negotiation (docs/decisions.md, "Structured-output negotiation").

Servers take a JSON schema in different request forms (``FORMS``, tried in that order). The
first schema-constrained call to an endpoint is its own probe: a request the server rejects
as an unsupported form is not retried as transient but sent again at once in the next form,
and the form that worked is remembered for the endpoint, process-wide (:data:`endpoint_forms`).
A call that fails for any other reason forgets it, so the next call negotiates again (the
server may have been replaced).
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

log = logging.getLogger("pmem.llm")

#: Structured-output request forms, in the order they are tried: OpenAI's ``json_schema``
#: (vLLM, SGLang, LM Studio, llama.cpp's own server, recent Ollama); ``json_object`` with the
#: schema beside it (llama-cpp-python's server); vLLM's ``structured_outputs`` and its older
#: ``guided_json`` body fields; and a plain prompt carrying the schema, parsed tolerantly.
FORMS = ("json_schema", "json_object", "structured_outputs", "guided_json", "prompt")


class EndpointForms:
    """The structured-output form found per (endpoint, model), shared by every client of the
    process: a probe counts as a call, so it is made once per endpoint, not per task."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._forms: dict[tuple[str, str], str] = {}
        self._negotiating: dict[tuple[str, str], threading.Lock] = {}

    def negotiation(self, base_url: str, model: str) -> threading.Lock:
        """Held by the one thread finding the form: the others of the process wait for what
        it finds instead of each sending a probe the server refuses."""
        with self._lock:
            return self._negotiating.setdefault((base_url.rstrip("/"), model), threading.Lock())

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
