"""A recording HTTP proxy in front of a real OpenAI-compatible server (the local model): it
forwards every request unchanged and logs what each was (job, structured-output form), the
status, and the token usage the server reported, so tests can count the calls of each
observation and compare its recorded tokens with the server's own figures. Nothing is
answered by the proxy itself: the real path stays real."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, ClassVar

from bench.model_wire import JsonHandler, ScriptedServer, chat_job
from tests.support.scripted_llm import _form_of


@dataclass(frozen=True)
class ProxiedCall:
    job: str  # extraction, annotation, identity, readout, answer, prune, chat, embeddings
    form: str
    status: int
    prompt_tokens: int
    completion_tokens: int
    at: float  # time.monotonic() when the answer came back


class RecordingProxy(ScriptedServer):
    """``with RecordingProxy("http://127.0.0.1:PORT") as proxy: proxy.base_url``."""

    def __init__(self, upstream: str) -> None:
        super().__init__()
        self.upstream = upstream.rstrip("/").removesuffix("/v1")
        self.calls: list[ProxiedCall] = []
        self._lock = threading.Lock()

    def start(self, port: int = 0, host: str = "127.0.0.1") -> RecordingProxy:
        self.serve(type("Handler", (_Handler,), {"proxy": self}), port, host, 0.05)
        return self

    def between(self, start: float, end: float) -> list[ProxiedCall]:
        with self._lock:
            return [c for c in self.calls if start <= c.at <= end]

    def record(self, call: ProxiedCall) -> None:
        with self._lock:
            self.calls.append(call)


class _Handler(JsonHandler):
    proxy: ClassVar[RecordingProxy]

    def do_GET(self) -> None:  # noqa: N802
        self._forward(None)

    def do_POST(self) -> None:  # noqa: N802
        self._forward(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

    def _forward(self, data: bytes | None) -> None:
        request = urllib.request.Request(self.proxy.upstream + self.path, data=data,
                                         method=self.command,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=600) as answer:
                status, payload = answer.status, answer.read()
        except urllib.error.HTTPError as exc:
            status, payload = exc.code, exc.read()
        if data is not None:
            self._record(json.loads(data), status, payload)
        self.send_raw(status, payload)

    def _record(self, body: dict[str, Any], status: int, payload: bytes) -> None:
        embeddings = self.path.rstrip("/").endswith("/embeddings")
        usage: dict[str, Any] = {}
        if status == 200:
            try:
                usage = json.loads(payload).get("usage") or {}
            except (ValueError, AttributeError):
                usage = {}
        self.proxy.record(ProxiedCall(
            job="embeddings" if embeddings else chat_job(body),
            form="" if embeddings else _form_of(body), status=status,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0), at=time.monotonic()))
