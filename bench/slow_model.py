"""A scripted OpenAI-compatible server that answers after a fixed latency, with a bounded number
of requests served at once: the model server of ``pmem_bench throughput``.

``SlowModel(latency=1.0, in_flight=8)`` listens on 127.0.0.1 (a free port) in a daemon thread and
answers ``POST /v1/chat/completions``, ``POST /v1/embeddings`` and ``GET /v1/models``. A chat
request waits for one of ``in_flight`` slots (the rest queue, as a vLLM server at its batch
limit does), holds it for ``latency`` seconds, then answers; embeddings answer at once
(``HashingEmbedder`` vectors). ``GET /stats`` returns the counters: requests per job (``chat_calls``: the write path's
three), prompt and
completion tokens (``len(text) // 4`` of the messages and of the answer, as reported in
``usage``), the most requests served at once and the most waiting for a slot.

Jobs are recognised as the service marks them (``memory.llm.prompts``): the ``response_format``
schema name, else the first line of the system prompt (:mod:`bench.model_wire`, which the
tests' scripted server shares). Answers are deterministic:

- extraction: every ``key = value`` line of the ``<observation>`` after its first line is a
  fact ``{key, value, assertion: "asserted"}`` (``Item <id> now shows <value>.``: the one fact
  ``{<id>, <value>}``). When the request shows a ``<memory>`` block
  (the current heads, ``{"key", "value", "status", ...}``: a JSON list, or one JSON object a
  line), each fact also carries ``op`` (``noop`` when the value equals its key's head, case and spaces aside, else
  ``accept``) and ``old_value`` (the head's value, or null);
- annotation: per item of the ``<facts>`` JSON, ``noop`` when the value equals the head, else
  ``accept``;
- identity: ``same`` when two keys have the same set of ``_``-separated words, else
  ``different``; one pair (``<key_a>``/``<key_b>``, one word) or many (``<pairs>`` JSON of
  ``{"a", "b"}``, answered ``{"answers": [...]}``).

``SlowModel(in_flight=1, upstream=URL)`` is the same server in front of a real endpoint: each
chat request waits for a slot, is forwarded as it came, and the upstream's answer is passed back;
the counters are the same, tokens are the upstream's ``usage``, and ``busy_seconds`` sums how
long the write path's calls held a slot (their mean is the model's latency).

It imports nothing from the tests: benchmarks run it from a plain checkout. Run alone:
``python -m bench.slow_model --latency 1.0 --in-flight 8 --port 8766``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import threading
import time
from collections import Counter
from typing import Any, ClassVar

import django
import requests

from memory.domain import normalize_key

from .model_wire import (
    JsonHandler,
    ScriptedServer,
    chat_job,
    completion,
    embeddings,
    identity_answer,
    tagged,
    user_text,
)

WRITE_JOBS = ("extraction", "annotation", "identity")
_LINE = re.compile(r"^\s*([^=\n]+?)\s*=\s*(.+?)\s*$")
_ITEM = re.compile(r"^Item (\S+) now shows (.+?)\.$")  # the ids stream's prose


class SlowModel(ScriptedServer):
    """The server; use as a context manager (``with SlowModel(latency=0.5) as srv: srv.base_url``)."""

    def __init__(self, latency: float = 1.0, in_flight: int = 8, model: str = "slow", *,
                 upstream: str | None = None) -> None:
        super().__init__()
        self.latency = latency
        self.upstream = upstream.rstrip("/") if upstream else None
        self.in_flight = in_flight
        self.model = model
        self._slots = threading.BoundedSemaphore(in_flight)
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()  # answered requests
        self.errors: Counter[str] = Counter()  # requests the upstream refused or failed
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.busy_seconds = 0.0  # summed time the write path's calls held a slot
        # extraction: facts it was asked for, and those whose key's head <memory> showed
        self.shown = Counter({"facts": 0, "facts_with_head_shown": 0})
        self.max_in_flight = 0
        self.max_waiting = 0
        # (epoch start, epoch end) of each write-path call since the last reset: where the
        # slots stood idle (bench.throughput's loss breakdown)
        self.spans: list[tuple[float, float]] = []
        self._serving = 0
        self._waiting = 0

    def start(self, port: int = 0, host: str = "127.0.0.1") -> SlowModel:
        self.serve(type("Handler", (_Handler,), {"server_state": self}), port, host, 0.05)
        return self

    @property
    def stats_url(self) -> str:
        return f"{self.origin}/stats"

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"counts": dict(self.counts), "errors": dict(self.errors), "chat_calls": self._chat_calls(),
                    "prompt_tokens": self.prompt_tokens,
                    "completion_tokens": self.completion_tokens,
                    "busy_seconds": round(self.busy_seconds, 4), "upstream": self.upstream,
                    "extraction_facts": self.shown["facts"],
                    "extraction_facts_with_head_shown": self.shown["facts_with_head_shown"],
                    "max_in_flight": self.max_in_flight, "max_waiting": self.max_waiting,
                    "spans": list(self.spans),
                    "serving": self._serving, "waiting": self._waiting,
                    "latency": self.latency, "in_flight": self.in_flight}

    def reset_peaks(self) -> None:
        with self._lock:
            self.max_in_flight = self.max_waiting = 0
            self.spans = []

    def _chat_calls(self) -> int:
        """Calls of the write path's jobs (a health check's probe is none of them)."""
        return sum(n for job, n in self.counts.items() if job in WRITE_JOBS)

    def serve_chat(self, job: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Wait for a slot, hold it for the latency (or the upstream's answer), return the
        status and body to answer with."""
        if job == "extraction":
            facts = extraction_answer(user_text(body))["facts"]
            with self._lock:
                self.shown["facts"] += len(facts)
                self.shown["facts_with_head_shown"] += sum(f.get("old_value") is not None
                                                           for f in facts)
        with self._lock:
            self._waiting += 1
            self.max_waiting = max(self.max_waiting, self._waiting)
        self._slots.acquire()
        try:
            with self._lock:
                self._waiting -= 1
                self._serving += 1
                self.max_in_flight = max(self.max_in_flight, self._serving)
            began = time.perf_counter()
            try:
                status, payload = (self._forward(body) if self.upstream else
                                   (200, self._scripted(job, body)))
            finally:
                held = time.perf_counter() - began
                with self._lock:
                    self._serving -= 1
            usage = payload.get("usage") or {}
            with self._lock:
                if status != 200:  # refused (a structured-output form it does not take)
                    self.errors[job] += 1
                    return status, payload
                self.counts[job] += 1
                if job in WRITE_JOBS:
                    self.busy_seconds += held
                    ended = time.time()
                    self.spans.append((ended - held, ended))
                self.prompt_tokens += int(usage.get("prompt_tokens") or 0)
                self.completion_tokens += int(usage.get("completion_tokens") or 0)
            return status, payload
        finally:
            self._slots.release()

    def _scripted(self, job: str, body: dict[str, Any]) -> dict[str, Any]:
        self._stop.wait(self.latency)
        return completion(body, answer(job, body), model=self.model,
                          ident=f"chatcmpl-{time.monotonic_ns()}")

    def _forward(self, body: dict[str, Any], path: str = "/chat/completions",
                 timeout: float = 600.0) -> tuple[int, dict[str, Any]]:
        """The upstream's answer to the same request, as it gave it."""
        try:
            answered = requests.post(f"{self.upstream}{path}", json=body, timeout=timeout)
            return answered.status_code, dict(answered.json())
        except (requests.RequestException, ValueError) as exc:
            return 502, {"error": {"message": f"upstream: {exc}"}}


# --- deterministic answers ---------------------------------------------------------------------


def _same(value: Any, other: Any) -> bool:
    return str(value).strip().casefold() == str(other).strip().casefold()


def _memory_heads(user: str) -> dict[str, Any] | None:
    """The heads a ``<memory>`` block shows, by normalised key (None: no block). The block is
    a JSON list of heads, or one JSON head a line."""
    block = tagged(user, "memory")
    if block is None:
        return None
    try:
        heads = json.loads(block or "[]")
    except json.JSONDecodeError:
        heads = []
        for line in block.splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                heads.append(json.loads(line))
    if isinstance(heads, dict):  # one head alone
        heads = [heads]
    return {normalize_key(str(h.get("key", ""))): h.get("value") for h in heads
            if isinstance(h, dict)}


def _pairs(text: str) -> list[tuple[str, str]]:
    """(key, value) of each fact: ``Item <id> now shows <value>.`` (the id is the key), else
    each ``key = value`` line after the first."""
    item = _ITEM.match(text.strip())
    if item:
        return [(item.group(1), item.group(2))]
    found = (_LINE.match(line) for line in text.splitlines()[1:])
    return [(m.group(1), m.group(2)) for m in found if m]


def extraction_answer(user: str) -> dict[str, Any]:
    text = tagged(user, "observation") or ""
    heads = _memory_heads(user)
    facts: list[dict[str, Any]] = []
    for key, value in _pairs(text):
        fact: dict[str, Any] = {"key": key, "value": value, "assertion": "asserted"}
        if heads is not None:
            old = heads.get(normalize_key(fact["key"]))
            fact["old_value"] = old
            fact["op"] = "noop" if old is not None and _same(fact["value"], old) else "accept"
        facts.append(fact)
    return {"facts": facts}


def annotation_answer(user: str) -> dict[str, Any]:
    try:
        items = json.loads(tagged(user, "facts") or "{}").get("facts", [])
    except (json.JSONDecodeError, AttributeError):
        items = []
    operations = []
    for item in items:
        head = item.get("head_value")
        noop = head is not None and _same(item.get("value"), head)
        operations.append({"op": "noop" if noop else "accept", "key": item.get("key"),
                           "old_value": head, "new_value": item.get("value"),
                           "status": "unchanged" if noop else "active", "supersedes": not noop})
    return {"operations": operations}


def answer(job: str, body: dict[str, Any]) -> str:
    """The assistant's message content for one chat request."""
    user = user_text(body)
    result: Any
    if job == "extraction":
        result = extraction_answer(user)
    elif job == "annotation":
        result = annotation_answer(user)
    elif job == "identity":
        result = identity_answer(user)
    else:
        result = "ok"
    return result if isinstance(result, str) else json.dumps(result)


# --- HTTP ---------------------------------------------------------------------------------------


class _Handler(JsonHandler):
    server_state: ClassVar[SlowModel]

    def do_GET(self) -> None:  # noqa: N802
        path = self.path.rstrip("/")
        if path.endswith("/v1/models") and self.server_state.upstream:
            answered = requests.get(f"{self.server_state.upstream}/models", timeout=30)
            self.send_json(answered.status_code, answered.json())
        elif path.endswith("/v1/models"):
            self.send_json(200, {"object": "list",
                             "data": [{"id": self.server_state.model, "object": "model"}]})
        elif path.endswith("/stats"):
            self.send_json(200, self.server_state.stats())
        else:
            self.send_json(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:  # noqa: N802
        try:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            self.send_json(400, {"error": {"message": "invalid JSON body"}})
            return
        path = self.path.rstrip("/")
        try:
            if path.endswith("/stats/reset"):  # a new measurement: peaks from here on
                self.server_state.reset_peaks()
                self.send_json(200, self.server_state.stats())
            elif path.endswith("/chat/completions"):
                self._chat(body)
            elif path.endswith("/embeddings"):
                self._embeddings(body)
            else:
                self.send_json(404, {"error": {"message": "not found"}})
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up: nothing to answer

    def _chat(self, body: dict[str, Any]) -> None:
        self.send_json(*self.server_state.serve_chat(chat_job(body), body))

    def _embeddings(self, body: dict[str, Any]) -> None:
        if self.server_state.upstream:
            self.send_json(*self.server_state._forward(body, "/embeddings"))
            return
        with self.server_state._lock:
            self.server_state.counts["embeddings"] += 1
        self.send_json(200, embeddings(body))

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--in-flight", type=int, default=8)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--upstream", default=None,
                        help="a real endpoint (…/v1) to forward to, counting its calls")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pmem_site.settings")
    django.setup()  # the embeddings' HashingEmbedder reads the settings
    server = SlowModel(args.latency, args.in_flight, upstream=args.upstream).start(args.port)
    print(f"serving {server.base_url} (latency {args.latency}s, {args.in_flight} in flight)",
          flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.close()


if __name__ == "__main__":
    main()
