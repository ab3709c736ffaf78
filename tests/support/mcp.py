"""The MCP server as ``make run`` starts it (``pmem_site.run.mcp_command``) in a real process,
and MCP sessions from the official SDK's client over streamable HTTP and over stdio."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx2
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def mcp_http_process(api_url: str, log_dir: Path) -> Iterator[str]:
    """Start ``python -m pmem_mcp`` the way ``make run`` does; yield its ``/mcp`` URL; stop it
    with SIGTERM (Ctrl-C's signal for ``make run``'s children) and check that it exited."""
    from pmem_site.run import mcp_command

    port = free_port()
    log_dir.mkdir(parents=True, exist_ok=True)
    log = (log_dir / f"mcp-{port}.log").open("ab")
    proc = subprocess.Popen(mcp_command(port, api_url), cwd=ROOT, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, "PMEM_MCP_LOG_LEVEL": "info"})
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the MCP server exited: {(log_dir / f'mcp-{port}.log').read_text()}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the MCP server did not listen within 60 s")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
        log.close()


@contextlib.asynccontextmanager
async def http_session(url: str, token: str | None,
                       namespace: str | None = None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    if namespace is not None:  # an application token's session names its namespace
        headers["X-Pmem-Namespace"] = namespace
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as http, \
            streamable_http_client(url, http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        yield session


@contextlib.asynccontextmanager
async def stdio_session(*args: str, env: dict[str, str]) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=sys.executable, args=["manage.py", "pmem_mcp", *args],
                                   cwd=str(ROOT), env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def structured(result: Any) -> dict[str, Any]:
    """A successful tool result's JSON (structured content, else its text)."""
    assert not result.is_error, result.content
    if result.structured_content is not None:
        content = result.structured_content
        return content.get("result", content) if set(content) == {"result"} else content
    return json.loads(result.content[0].text)


def error_text(result: Any) -> str:
    assert result.is_error, result
    return " ".join(c.text for c in result.content if getattr(c, "text", None))


def text(result: Any) -> str:
    """A successful tool result's text (a tool that answers text, like recall)."""
    assert not result.is_error, result.content
    return "\n".join(c.text for c in result.content if getattr(c, "text", None))
