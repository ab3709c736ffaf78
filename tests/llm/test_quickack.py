"""The model client acknowledges a server's segments at once, so a server that writes headers and
body apart with Nagle on (Python's http.server) costs it no delayed-ACK wait per call.

Measured without a clock: Linux counts the acknowledgements it delayed (``DelayedACKs`` in
/proc/net/netstat). Against such a server, a plain keep-alive client delays one per call; ours
none. The plain client is the control that shows this kernel delays them at all here."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import openai
import pytest

from memory.llm.transport import sdk_client

CALLS = 40
NETSTAT = Path("/proc/net/netstat")

pytestmark = pytest.mark.skipif(
    not hasattr(socket, "TCP_QUICKACK") or not NETSTAT.exists(),
    reason="TCP_QUICKACK and the kernel's DelayedACKs counter are Linux's")


class _NagleHandler(BaseHTTPRequestHandler):
    """Headers in one write, the body in another, Nagle left on: http.server's way."""

    protocol_version = "HTTP/1.1"  # keep-alive, as every SDK client uses it

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "ok"}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def nagle_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NagleHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def _delayed_acks() -> int:
    lines = NETSTAT.read_text().splitlines()
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        if names.startswith("TcpExt:"):
            return int(values.split()[names.split().index("DelayedACKs")])
    raise AssertionError("no TcpExt line in /proc/net/netstat")


def _delayed_during_calls(client: openai.OpenAI) -> int:
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    before = _delayed_acks()  # the connection is open and warm: only the calls below count
    for _ in range(CALLS):
        answer = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}])
        assert answer.choices[0].message.content == "ok"
    return _delayed_acks() - before


def test_the_model_client_delays_no_acknowledgement_of_a_nagle_server(nagle_server: str) -> None:
    plain = openai.OpenAI(base_url=nagle_server, api_key="x", max_retries=0)
    control = _delayed_during_calls(plain)
    if control < CALLS // 2:
        pytest.skip(f"this kernel delayed only {control} ACKs of {CALLS} plain calls here")

    ours = _delayed_during_calls(sdk_client(nagle_server, "x", 30.0))

    assert ours < CALLS // 4, (f"{ours} acknowledgements delayed in {CALLS} calls "
                               f"(a plain client: {control})")
