"""What the web server refuses itself answers JSON, like every other error (CONTRACT, "Input
that is refused"): gunicorn as ``make run`` starts it (``pmem_site.run.web_command``), real
sockets, and the MCP server in front of it turning such a refusal into a short tool error."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from tests.support.mcp import error_text, free_port, http_session, mcp_http_process

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def web(django_db_setup: None, django_db_blocker: Any) -> Iterator[str]:
    """gunicorn with make run's command line, on the test database; its root URL."""
    from django.db import connection

    from pmem_site.run import web_command

    with django_db_blocker.unblock():
        name = str(connection.settings_dict["NAME"])
    port = free_port()
    logs = Path(os.environ["PMEM_DATA_DIR"]) / "edge-logs"
    logs.mkdir(parents=True, exist_ok=True)
    log = (logs / f"web-{port}.log").open("ab")
    env = {**os.environ, "PMEM_TEST_DB_NAME": name,
           "PMEM_WEB_WORKERS": "1", "DJANGO_SETTINGS_MODULE": "pmem_site.settings"}
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    proc = subprocess.Popen(web_command(port, logs / f"gunicorn-{port}.ctl"), cwd=ROOT,
                            env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (logs / f"web-{port}.log").read_text()[-2000:]
            with contextlib.suppress(httpx2.TransportError):
                if httpx2.get(f"{url}/healthz", timeout=2).status_code:
                    break
            assert time.monotonic() < deadline, "gunicorn did not answer within 60 s"
            time.sleep(0.2)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
        log.close()


def _json_refusal(response: Any, status: int, field: str) -> dict[str, Any]:
    assert response.status_code == status, response.text[:300]
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["field"] == field and body["error"], body
    return body


def test_a_request_line_past_the_limit_is_a_json_414(web):
    """The probe: a long URL got gunicorn's HTML 414."""
    response = httpx2.get(f"{web}/api/v1/whoami/", params={"pad": "x" * 9000})
    body = _json_refusal(response, 414, "request line")
    assert "uri too long" in body["error"]


@pytest.mark.parametrize("headers", [
    {"X-Pad": "x" * 9000},  # one header past its size
    {f"X-Pad-{i}": "x" for i in range(120)},  # too many headers
], ids=["large", "many"])
def test_headers_past_the_limits_are_a_json_431(web, headers):
    """The probe: large headers got gunicorn's HTML 431."""
    _json_refusal(httpx2.get(f"{web}/api/v1/whoami/", headers=headers), 431, "headers")


def test_a_malformed_request_line_is_a_json_400(web):
    host, port = web.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"NOT A REQUEST LINE\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400") and b"Content-Type: application/json" in head
    assert body.startswith(b'{"error": ')


def test_every_request_the_api_validates_fits_and_django_answers_it(web):
    """A query of 5 KB (a CJK key percent-encoded, a search as long, a cursor) is past
    gunicorn's default limit of 4094 bytes; Django answers it (here: 401, no token)."""
    response = httpx2.get(f"{web}/api/v1/whoami/", params={"search": "電話" * 300})
    assert len(str(response.request.url)) > 5000
    assert response.status_code == 401 and response.headers["content-type"].startswith(
        "application/json")


def test_the_mcp_tool_answers_a_refused_request_with_a_short_error(web, make_namespace):
    from memory.services import token_create

    ns = make_namespace("edge")
    token = token_create(namespace=ns, client="edge", scope="write").key

    async def call(url: str) -> str:
        async with http_session(url, token) as mcp:
            return error_text(await mcp.call_tool("get_fact", {"key": "é" * 2000}))

    with mcp_http_process(web, Path(os.environ["PMEM_DATA_DIR"]) / "edge-logs") as url:
        text = anyio.run(call, url)
    assert "<" not in text and len(text) < 200, text
    assert text.startswith("uri too long"), text


def test_the_access_log_keeps_no_query_string_nor_referer(web):
    """The probe: a search for a value later erased stayed in run.log's access lines."""
    port = web.rsplit(":", 1)[1]
    response = httpx2.get(f"{web}/healthz", params={"q": "SECRET-QS-4471"},
                          headers={"Referer": f"{web}/ns/x/?search=SECRET-REF-4471"})
    assert response.status_code == 200
    log = Path(os.environ["PMEM_DATA_DIR"]) / "edge-logs" / f"web-{port}.log"
    deadline = time.monotonic() + 10
    while '"GET /healthz HTTP/1.1" 200' not in log.read_text(errors="replace"):
        assert time.monotonic() < deadline, log.read_text(errors="replace")[-2000:]
        time.sleep(0.1)
    text = log.read_text(errors="replace")
    assert "SECRET-QS-4471" not in text and "SECRET-REF-4471" not in text
