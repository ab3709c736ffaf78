"""MCP over stdio, for an MCP client that starts its servers itself
(``manage.py pmem_mcp --namespace NAME``).

The tools are the same as over HTTP and go through the same HTTP API — only in-process: the
client's transport hands each request to Django's ASGI application directly, so no port is
needed and the API's authentication, validation and write order apply unchanged.
"""

from __future__ import annotations

import httpx2
from django.conf import settings
from django.core.asgi import get_asgi_application

from pmem_client import AsyncClient

from .server import build_server


def local_url() -> str:
    """A root URL whose host the site accepts (requests never leave the process)."""
    host = next((h for h in settings.ALLOWED_HOSTS if h and "*" not in h
                 and not h.startswith(".")), "localhost")
    return f"http://{host}"


def in_process_client(token: str, namespace: str | None = None) -> AsyncClient:
    transport = httpx2.ASGITransport(app=get_asgi_application())
    return AsyncClient(local_url(), token, channel="mcp", transport=transport,
                       namespace=namespace)


async def serve(client: AsyncClient) -> None:
    """Serve the tools on stdin/stdout until the MCP client closes them."""
    await build_server(lambda: client).run_stdio_async()
