"""A scripted OpenAI-compatible server over real HTTP, for tests that mock the model only at its
HTTP boundary (STYLE.md).

``ScriptedLLM`` listens on 127.0.0.1 (a free port) in a daemon thread and answers
``POST /v1/chat/completions``, ``POST /v1/embeddings`` and ``GET /v1/models``. It recognises the
job of a chat request by its ``response_format`` schema name, or else by the first line of the
system prompt (``# pmem_extraction`` / ``# pmem_annotation`` / ``# pmem_identity``, see
``memory.llm.prompts``), and answers deterministically:

- extraction: the rule extractor run on the ``<observation>`` text (``key = value`` lines and the
  ALFWorld templates), as ``{"facts": [...]}``; with ``srv.patches = True`` each fact also
  carries ``op`` and ``old_value``, a patch on the head ``<memory>`` shows for its key, chosen
  as annotation would choose it (``accept`` with ``old_value`` null for a key not shown);
- annotation: per item of the ``<facts>`` JSON, its ``suggested_op`` when present, else revoke
  for ``withdrawn``, contest for ``hedged``, accept otherwise;
- identity: ``same`` when the two keys have the same set of words (split on ``_``), else
  ``different``; for a ``<pairs>`` list, ``{"answers": [...]}`` by the same rule;
- embeddings: ``HashingEmbedder`` vectors (``dimensions`` honoured, float or base64).

The HTTP plumbing, the jobs' recognition, the answers' bodies and identity's rule are
:mod:`bench.model_wire`'s, shared with the throughput benchmark's server.

Structured output: ``ScriptedLLM(formats=...)`` names the request forms it takes
(``memory.llm.client.FORMS``; all by default). A request in another form is refused as the
server that does not take it would: ``json_schema`` with llama-cpp-python's HTTP 500 "Input
should be 'text' or 'json_object'", the others with a 400 naming the field; ``srv.formats``
may be changed while it runs (a server replaced by another). ``srv.forms`` logs the form of
every chat request.

Faults are scripted per request: ``srv.push(fault, job=...)`` queues one fault consumed by the
next request of that job (any job when None); ``srv.delay(job, seconds)`` slows every answer of
a job. ``srv.requests`` logs every request; ``srv.counts`` counts them per job;
``srv.max_in_flight`` records the most requests served at once.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest

from bench.model_wire import (
    JsonHandler,
    ScriptedServer,
    chat_job,
    completion,
    embeddings,
    identity_answer,
    tagged,
    user_text,
)
from memory.domain import normalize_key
from memory.llm.rules import RuleExtractor

ALL_FORMS = ("json_schema", "json_object", "structured_outputs", "guided_json", "prompt")
JOBS = ("extraction", "annotation", "identity", "embeddings", "answer", "readout", "prune")


@dataclass(frozen=True)
class Fault:
    """One scripted misbehaviour. Use the constants and factories on the class:
    ``Fault.INVALID_JSON``, ``WRONG_SCHEMA``, ``UNKNOWN_OP``, ``FOREIGN_KEY``, ``EMPTY``,
    ``HTTP_429``, ``HTTP_500``, ``Fault.TIMEOUT(seconds)``, ``Fault.CUSTOM(body)``,
    ``Fault.HTTP(status, retry_after=None)``, ``Fault.HOLD(seconds)``.

    ``CUSTOM`` replaces the assistant's message content of a chat answer (the whole response
    body of an embeddings answer). ``TIMEOUT`` sleeps before answering normally. ``HOLD``
    answers normally once the test calls :meth:`ScriptedLLM.release` (at the latest after
    ``seconds``): an order of events a test waits for, not a duration it hopes is enough.
    """

    kind: str
    seconds: float = 0.0
    body: str = ""
    status: int = 200
    retry_after: float | None = None

    INVALID_JSON: ClassVar[Fault]
    WRONG_SCHEMA: ClassVar[Fault]
    UNKNOWN_OP: ClassVar[Fault]
    FOREIGN_KEY: ClassVar[Fault]
    EMPTY: ClassVar[Fault]
    HTTP_429: ClassVar[Fault]
    HTTP_500: ClassVar[Fault]

    @staticmethod
    def TIMEOUT(seconds: float = 5.0) -> Fault:  # noqa: N802 - reads like the constants
        return Fault("timeout", seconds=seconds)

    @staticmethod
    def HOLD(seconds: float = 60.0) -> Fault:  # noqa: N802
        return Fault("hold", seconds=seconds)

    @staticmethod
    def CUSTOM(body: str) -> Fault:  # noqa: N802
        return Fault("custom", body=body)

    @staticmethod
    def HTTP(status: int, retry_after: float | None = None) -> Fault:  # noqa: N802
        return Fault("http", status=status, retry_after=retry_after)


Fault.INVALID_JSON = Fault("invalid_json")
Fault.WRONG_SCHEMA = Fault("wrong_schema")
Fault.UNKNOWN_OP = Fault("unknown_op")
Fault.FOREIGN_KEY = Fault("foreign_key")
Fault.EMPTY = Fault("empty")
Fault.HTTP_429 = Fault("http", status=429, retry_after=0.0)
Fault.HTTP_500 = Fault("http", status=500)


@dataclass(frozen=True)
class LoggedRequest:
    job: str
    path: str
    body: dict[str, Any]


class ScriptedLLM(ScriptedServer):
    """The server; use as a context manager (``with ScriptedLLM() as srv: srv.base_url``)."""

    def __init__(self, model: str = "scripted", formats: Any = None, *,
                 api_key: str | None = None, strict_model: bool = False) -> None:
        super().__init__()
        self.model = model
        self.api_key = api_key  # when set, a request without this bearer token gets 401
        self.strict_model = strict_model  # when set, another model name gets vLLM's 404
        self.formats: set[str] = set(formats if formats is not None else ALL_FORMS)
        self.forms: list[str] = []
        self.requests: list[LoggedRequest] = []
        self.max_in_flight = 0
        self._busy: Counter[str] = Counter()  # requests in flight, by job
        self._most: Counter[str] = Counter()  # the most in flight at once, by job
        self.patches = False  # extraction answers with op/old_value against <memory>
        self._in_flight = 0
        self._faults: list[tuple[str | None, Fault]] = []
        self._delays: dict[str, float] = {}
        self._gathers: dict[str, tuple[int, float]] = {}
        self._replies: dict[str, list[Any]] = {}
        self._lock = threading.Lock()
        self._released = threading.Event()
        self._extractor = RuleExtractor()

    # --- lifecycle ------------------------------------------------------------------------

    def start(self, port: int = 0, host: str = "127.0.0.1") -> ScriptedLLM:
        """Listen on ``host:port`` (a free port by default; the same one again, after
        :meth:`close`, brings a server that was down back at its address)."""
        self.serve(type("Handler", (_Handler,), {"scripted": self}), port, host, 0.02)
        return self

    # --- scripting ------------------------------------------------------------------------

    def push(self, fault: Fault, job: str | None = None, times: int = 1) -> None:
        """Queue ``fault`` for the next ``times`` requests of ``job`` (any job when None)."""
        if job is not None and job not in JOBS:
            raise ValueError(f"job must be one of {JOBS} or None")
        with self._lock:
            self._faults.extend([(job, fault)] * times)

    def clear_faults(self) -> None:
        """Drop the faults not served yet (a fault pushed for "every request until told
        otherwise" instead of a number of tries that depends on how the retries fall)."""
        with self._lock:
            self._faults.clear()

    def delay(self, job: str, seconds: float) -> None:
        """Delay every answer of ``job`` by ``seconds`` (0 removes the delay)."""
        with self._lock:
            self._delays[job] = seconds

    def gather(self, job: str, calls: int, seconds: float = 30.0) -> None:
        """Hold every answer of ``job`` until ``calls`` requests of it have been in flight at
        once, or for ``seconds`` at most. A test of concurrency then waits for the calls it
        expects instead of guessing how long a busy machine takes to send them: when they
        all come, they are answered at once; when they never do, ``max_in_flight_of`` says
        how many came."""
        with self._lock:
            self._gathers[job] = (calls, seconds)

    @property
    def counts(self) -> Counter[str]:
        with self._lock:
            return Counter(r.job for r in self.requests)

    def requests_for(self, job: str) -> list[LoggedRequest]:
        with self._lock:
            return [r for r in self.requests if r.job == job]

    def max_in_flight_of(self, job: str) -> int:
        """The most requests of ``job`` served at once."""
        with self._lock:
            return self._most[job]

    def pending_faults(self) -> int:
        with self._lock:
            return len(self._faults)

    # --- used by the handler ------------------------------------------------------------------

    def _begin(self, job: str, path: str, body: dict[str, Any]) -> tuple[Fault | None, float]:
        with self._lock:
            self.requests.append(LoggedRequest(job, path, body))
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            self._busy[job] += 1
            self._most[job] = max(self._most[job], self._busy[job])
            fault = None
            for index, (wanted, queued) in enumerate(self._faults):
                if wanted is None or wanted == job:
                    fault = queued
                    del self._faults[index]
                    break
            return fault, self._delays.get(job, 0.0)

    def reply(self, job: str, *answers: Any) -> None:
        """Queue the next answers of ``job`` ('answer', 'readout', 'prune'); when the queue is
        empty the defaults apply: answer → the first state line's value (or the newest flat
        line), readout → answer with that value, prune → 'yes'."""
        with self._lock:
            self._replies.setdefault(job, []).extend(answers)

    def _scripted_reply(self, job: str, user: str) -> Any:
        with self._lock:
            queued = self._replies.get(job) or []
            if queued:
                return queued.pop(0)
        if job == "prune":
            return "yes"
        if job == "readout":
            return {"action": "answer", "answer": _default_answer(user)}
        return _default_answer(user)

    def _end(self, job: str) -> None:
        with self._lock:
            self._in_flight -= 1
            self._busy[job] -= 1

    def release(self) -> None:
        """Let every request held by a ``HOLD`` fault answer (now and until :meth:`reset`)."""
        self._released.set()

    def _hold(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self._released.is_set() and not self._stop.is_set():
            if time.monotonic() >= deadline:
                return
            self._released.wait(0.02)

    def _gather(self, job: str) -> None:
        with self._lock:
            calls, seconds = self._gathers.get(job, (0, 0.0))
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not self._stop.is_set():
            with self._lock:
                if self._most[job] >= calls:
                    return
            self._stop.wait(0.02)

    def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._stop.wait(seconds)

    def _extract(self, text: str, memory: str = "") -> dict[str, Any]:
        facts = []
        for line in text.splitlines():
            # "Maybe: k = v" is hedged, "Withdrawn: k = v" a retraction of that value.
            marker, _, rest = line.partition(": ")
            assertion = {"Maybe": "hedged", "Withdrawn": "withdrawn"}.get(marker)
            facts += [{"key": f.key, "value": f.value, "assertion": assertion or f.assertion}
                      for f in self._extractor.extract(rest if assertion else line)]
        if self.patches:
            heads = {}
            for line in memory.splitlines():
                try:
                    head = json.loads(line)
                except json.JSONDecodeError:
                    continue
                heads[normalize_key(str(head.get("key", "")))] = head
            for fact in facts:
                head = heads.get(normalize_key(fact["key"]))
                if head is None:
                    fact.update(op="accept", old_value=None)
                else:
                    chosen = _annotate_one({**fact, "head_value": head.get("value")})
                    fact.update(op=chosen["op"], old_value=head.get("value"))
        return {"facts": facts}


# --- deterministic answers -----------------------------------------------------------------


def _annotation_answer(user: str) -> dict[str, Any]:
    try:
        items = json.loads(tagged(user, "facts") or "").get("facts", [])
    except (json.JSONDecodeError, AttributeError):
        items = []
    return {"operations": [_annotate_one(item) for item in items]}


def _annotate_one(item: dict[str, Any]) -> dict[str, Any]:
    assertion = item.get("assertion")
    op = item.get("suggested_op") or (
        "revoke" if assertion == "withdrawn" else "contest" if assertion == "hedged" else "accept"
    )
    status = {
        "accept": "active",
        "reject": "active",
        "resolve": "active",
        "contest": "alternative",
        "revoke": "revoked",
    }.get(op, "unchanged")
    return {
        "op": op,
        "key": item.get("key"),
        "old_value": item.get("head_value"),
        "new_value": item.get("value"),
        "status": status,
        "supersedes": op in ("accept", "reject", "resolve"),
    }


def _faulty_content(job: str, fault: Fault, normal: Any) -> str:
    """The message content a content-level fault produces for ``job``."""
    if fault.kind == "custom":
        return fault.body
    if fault.kind == "empty":
        return ""
    if fault.kind == "invalid_json":
        return '{"facts": [{"key": "broken' if job != "identity" else "maybe?"
    if fault.kind == "unknown_op" and job == "annotation":
        return json.dumps({"operations": [{**op, "op": "merge"} for op in normal["operations"]]})
    if fault.kind == "foreign_key" and job == "annotation":
        foreign = {
            "op": "accept",
            "key": "never_asked_key",
            "old_value": None,
            "new_value": "x",
            "status": "active",
            "supersedes": True,
        }
        return json.dumps({"operations": [foreign, *normal["operations"]]})
    # wrong_schema, and unknown_op/foreign_key for jobs that have no ops
    return json.dumps({"result": "ok"}) if job != "identity" else "perhaps"


# --- HTTP -----------------------------------------------------------------------------------


class _Handler(JsonHandler):
    scripted: ClassVar[ScriptedLLM]

    def do_GET(self) -> None:  # noqa: N802
        if self.path.rstrip("/").endswith("/v1/models"):
            self._send(
                200, {"object": "list", "data": [{"id": self.scripted.model, "object": "model"}]}
            )
        else:
            self._send(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:  # noqa: N802
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        except json.JSONDecodeError:
            self._send(400, {"error": {"message": "invalid JSON body"}})
            return
        if self._refused(body):
            return
        path = self.path.rstrip("/")
        if path.endswith("/chat/completions"):
            job = chat_job(body)
            form = _form_of(body)
            with self.scripted._lock:
                self.scripted.forms.append(form)
            if form not in self.scripted.formats and form != "prompt":
                with self.scripted._lock:  # logged, but no queued fault is consumed by it
                    self.scripted.requests.append(LoggedRequest(job, path, body))
                self._refuse_form(form)
                return
        elif path.endswith("/embeddings"):
            job = "embeddings"
        else:
            self._send(404, {"error": {"message": "not found"}})
            return
        fault, delay = self.scripted._begin(job, path, body)
        try:
            self.scripted._sleep(
                delay + (fault.seconds if fault and fault.kind == "timeout" else 0)
            )
            if fault is not None and fault.kind == "hold":
                self.scripted._hold(fault.seconds)
            self.scripted._gather(job)
            self._answer(job, body, fault)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test): nothing to answer
        finally:
            self.scripted._end(job)

    def _refused(self, body: dict[str, Any]) -> bool:
        """401 for a wrong API key, 404 for an unknown model name (as vLLM words it)."""
        wanted = self.scripted.api_key
        if wanted is not None and self.headers.get("Authorization") != f"Bearer {wanted}":
            self._send(401, {"error": {"message": "Unauthorized", "type": "invalid_api_key"}})
            return True
        if self.scripted.strict_model and body.get("model") != self.scripted.model:
            self._send(404, {"error": {"message": f"The model `{body.get('model')}` does not "
                                                  "exist.", "type": "NotFoundError"}})
            return True
        return False

    def _refuse_form(self, form: str) -> None:
        if form == "json_schema":  # llama-cpp-python's server, word for word
            detail = ("[{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
                      "'msg': \"Input should be 'text' or 'json_object'\", "
                      "'input': 'json_schema'}]")
            self._send(500, {"error": {"message": detail, "type": "internal_server_error"}})
        elif form == "json_object":
            self._send(400, {"error": {"message": "response_format type 'json_object' is not "
                                                  "supported"}})
        else:
            self._send(400, {"error": {"message": f"{form}: Extra inputs are not permitted"}})

    def _answer(self, job: str, body: dict[str, Any], fault: Fault | None) -> None:
        if fault is not None and fault.kind == "http":
            headers = {} if fault.retry_after is None else {"Retry-After": f"{fault.retry_after:g}"}
            message = {"error": {"message": f"scripted {fault.status}", "code": fault.status}}
            self._send(fault.status, message, headers)
        elif job == "embeddings":
            self._embeddings(body, fault)
        else:
            self._chat(job, body, fault)

    def _chat(self, job: str, body: dict[str, Any], fault: Fault | None) -> None:
        user = user_text(body)
        normal: Any
        if job == "extraction":
            normal = self.scripted._extract(tagged(user, "observation") or "",
                                            tagged(user, "memory") or "")
        elif job == "annotation":
            normal = _annotation_answer(user)
        elif job == "identity":
            normal = identity_answer(user)
        elif job in ("answer", "readout", "prune"):
            normal = self.scripted._scripted_reply(job, user)
        else:
            normal = "ok"
        if fault is not None and fault.kind not in ("timeout", "hold"):
            content = _faulty_content(job, fault, normal)
        else:
            content = normal if isinstance(normal, str) else json.dumps(normal)
        self._send(200, completion(body, content, model=self.scripted.model,
                                   ident=f"chatcmpl-{len(self.scripted.requests)}"))

    def _embeddings(self, body: dict[str, Any], fault: Fault | None) -> None:
        if fault is not None and fault.kind == "custom":
            self.send_raw(200, fault.body.encode())
            return
        self._send(200, embeddings(body))

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self.send_json(status, payload, headers)


def _form_of(body: dict[str, Any]) -> str:
    """The structured-output form a chat request uses (``prompt`` when none)."""
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") in ("json_schema", "json_object"):
        return str(fmt["type"])
    for field in ("structured_outputs", "guided_json"):
        if field in body:
            return field
    return "prompt"


def _memory_lines(user: str) -> list[str]:
    """The memory lines of an answer/readout prompt (after 'Memory:' and its header line)."""
    body = user.split("Memory:\n", 1)[-1].split("\n\nQuestion:", 1)[0]
    return [line for line in body.splitlines()[1:] if line.strip()]


def _default_answer(user: str) -> str:
    """A deterministic reader: the value of the first state line, else the newest flat line."""
    lines = _memory_lines(user)
    for line in lines:
        if " = " in line:
            return line.split(" = ", 1)[1].split(";", 1)[0].replace(" (contested)", "").strip()
    return lines[-1] if lines else "unknown"


@pytest.fixture
def scripted_llm() -> Iterator[ScriptedLLM]:
    """A started :class:`ScriptedLLM`, closed after the test."""
    with ScriptedLLM() as server:
        yield server
