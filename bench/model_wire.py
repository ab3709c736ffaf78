"""What the scripted OpenAI-compatible servers share: the throughput benchmark's
(:mod:`bench.slow_model`) and the tests' (``tests/support/scripted_llm.py``, which imports it
from here: benchmarks never import the tests).

- :class:`ScriptedServer`: a threaded HTTP server in a daemon thread, on a free port of
  127.0.0.1 by default, its life cycle and its URL; :class:`JsonHandler`: JSON answers, no log;
- which job a chat request is, as the service marks it (``memory.llm.prompts``): the
  ``response_format`` schema's name, else the first line of the system prompt, else the
  wording of the reader's prompts;
- the bodies answered: a chat completion whose ``usage`` counts a quarter of the characters,
  and ``HashingEmbedder`` embeddings (floats, or base64 when asked);
- soft identity's answer: ``same`` when two keys hold the same set of words.

Extraction and annotation are the servers' own: the tests' server runs the rule extractor
and answers annotation by the facts' assertions (a test scripts what it needs), the
benchmark's reads ``key = value`` lines and answers ``noop`` for a value equal to its head,
so that a stream's updates and repeats cost what they would at a model.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

import numpy as np

from memory.domain import normalize_key
from memory.llm import prompts

SCHEMA_JOBS = {prompts.EXTRACTION: "extraction", prompts.ANNOTATION: "annotation",
               prompts.IDENTITY: "identity"}
HEADER_JOBS = {f"# {name}": job for name, job in SCHEMA_JOBS.items()}


def tokens(text: str) -> int:
    """The token count reported in ``usage``: a quarter of the characters."""
    return len(text) // 4


def tagged(text: str, tag: str) -> str | None:
    """What ``<tag>…</tag>`` holds in ``text`` (None: no such block)."""
    found = re.search(rf"<{tag}>\n?(.*?)\n?</{tag}>", text, re.DOTALL)
    return found.group(1) if found else None


def user_text(body: dict[str, Any]) -> str:
    """The user messages of a chat request, one after the other."""
    return "\n".join(str(m.get("content", "")) for m in body.get("messages") or []
                     if m.get("role") == "user")


def schema_of(body: dict[str, Any]) -> dict[str, Any]:
    """The JSON schema a chat request asks for, in whichever form it came."""
    fmt = body.get("response_format")
    if isinstance(fmt, dict):
        found = (fmt.get("json_schema") or {}).get("schema") or fmt.get("schema")
        if isinstance(found, dict):
            return found
    outputs = body.get("structured_outputs")
    if isinstance(outputs, dict) and isinstance(outputs.get("json"), dict):
        return outputs["json"]
    return body["guided_json"] if isinstance(body.get("guided_json"), dict) else {}


def chat_job(body: dict[str, Any]) -> str:
    """``extraction``, ``annotation``, ``identity``, ``readout``, ``prune``, ``answer``, or
    ``chat`` (anything else: a health check's probe)."""
    fmt = body.get("response_format") or {}
    name = (fmt.get("json_schema") or {}).get("name") if isinstance(fmt, dict) else None
    if name is None and "action" in (schema_of(body).get("properties") or {}):
        name = prompts.READOUT  # the readout's schema, sent in a form without a name
    if name in SCHEMA_JOBS:
        return SCHEMA_JOBS[name]
    for message in body.get("messages") or []:
        if message.get("role") == "system":
            first = str(message.get("content", "")).strip().splitlines()[:1]
            if first and first[0].strip() in HEADER_JOBS:
                return HEADER_JOBS[first[0].strip()]
    if name == prompts.READOUT:
        return "readout"
    text = "\n".join(str(m.get("content", "")) for m in body.get("messages") or [])
    if "Do A and B state different values" in text:
        return "prune"
    if "You answer questions from" in text:
        return "answer"
    return "chat"


def same_keys(a: str, b: str) -> str:
    """Soft identity's answer for two keys: ``same`` when they hold the same set of words."""
    words = [frozenset(normalize_key(key).split("_")) for key in (a, b)]
    return "same" if words[0] == words[1] and words[0] != frozenset({""}) else "different"


def identity_answer(user: str) -> Any:
    """One pair (``<key_a>``/``<key_b>``: one word) or many (``<pairs>`` JSON of ``{"a", "b"}``:
    ``{"answers": [...]}``)."""
    pairs = tagged(user, "pairs")
    if pairs is not None:
        try:
            listed = json.loads(pairs)
        except json.JSONDecodeError:
            listed = []
        return {"answers": [same_keys(str(p.get("a", "")), str(p.get("b", ""))) for p in listed
                            if isinstance(p, dict)]}
    return same_keys(tagged(user, "key_a") or "", tagged(user, "key_b") or "")


def completion(body: dict[str, Any], content: str, *, model: str, ident: str) -> dict[str, Any]:
    """A chat completion answering ``body`` with ``content``."""
    prompt = sum(tokens(str(m.get("content", ""))) for m in body.get("messages") or [])
    return {
        "id": ident, "object": "chat.completion", "created": 0,
        "model": body.get("model", model),
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": tokens(content),
                  "total_tokens": prompt + tokens(content)},
    }


def embeddings(body: dict[str, Any]) -> dict[str, Any]:
    """``HashingEmbedder`` vectors of the request's input (``dimensions`` honoured)."""
    from memory.llm.embedding import HashingEmbedder  # reads Django's settings: not at import

    texts = body.get("input")
    texts = [texts] if isinstance(texts, str) else list(texts or [])
    vectors = HashingEmbedder(int(body.get("dimensions") or 384)).embed(texts)
    as_base64 = body.get("encoding_format") == "base64"
    used = sum(len(t) for t in texts) // 4
    return {"object": "list", "model": body.get("model"),
            "data": [{"object": "embedding", "index": i,
                      "embedding": _b64(v) if as_base64 else v} for i, v in enumerate(vectors)],
            "usage": {"prompt_tokens": used, "total_tokens": used}}


def _b64(vector: list[float]) -> str:
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode()


class JsonHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence the log
        return

    def send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self.send_raw(status, json.dumps(payload).encode(), headers)

    def send_raw(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


class ScriptedServer:
    """A server's life cycle; a subclass's ``start`` calls :meth:`serve` with its handler."""

    _httpd: ThreadingHTTPServer | None = None

    def __init__(self) -> None:
        self._stop = threading.Event()  # set at close: wakes handlers sleeping on a latency

    def start(self, port: int = 0, host: str = "127.0.0.1") -> Self:
        raise NotImplementedError

    def serve(self, handler: type[BaseHTTPRequestHandler], port: int, host: str,
              poll_interval: float) -> None:
        """Listen on ``host:port`` (a free port for 0; the same one again, after :meth:`close`,
        brings a server that was down back at its address)."""
        self._stop.clear()
        self._httpd = ThreadingHTTPServer((host, port), handler)
        self._httpd.daemon_threads = True
        self._httpd.request_queue_size = 256  # a burst of connections must not be refused
        threading.Thread(target=self._httpd.serve_forever,
                         kwargs={"poll_interval": poll_interval}, daemon=True).start()

    def close(self) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return int(self._httpd.server_address[1])

    @property
    def origin(self) -> str:
        assert self._httpd is not None, "server not started"
        return f"http://{self._httpd.server_address[0]!s}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.origin}/v1"
