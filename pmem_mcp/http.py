"""MCP over streamable HTTP at ``/mcp`` (``python -m pmem_mcp``; ``make run`` starts it on
``PMEM_MCP_PORT``, default 8001, beside the web server).

Authentication is the API's own: ``Authorization: Bearer <api token>`` is checked with
``GET /api/v1/whoami/`` before the MCP session sees the request (the SDK's bearer-auth
middleware refuses a missing or unknown token with 401, so no tool runs), and every tool
forwards the same token to the API, declaring the channel ``mcp`` so that the API signs the
writes ``mcp:<client>`` (the log says which door a write came through).
The token's namespace is the memory the agent sees: the API answers for nothing else. An
application token (one for every namespace of a prefix) names the namespace of the session in
the header ``X-Pmem-Namespace``; the API refuses (404) one outside its prefix, as it refuses any
namespace a token cannot reach.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import time
from collections import OrderedDict
from contextvars import ContextVar

import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import pmem_client
from pmem_client import AsyncClient, Whoami

from .server import build_server

DEFAULT_PORT = 8001
MCP_PATH = "/mcp"
#: How long a verified token is trusted without asking ``whoami`` again. Only successes are
#: remembered; a token revoked meanwhile is refused by the API on its next tool call anyway.
VERIFIED_FOR_S = 30.0
MAX_CLIENTS = 256
REFUSED = (pmem_client.Unauthorized, pmem_client.Forbidden, pmem_client.NotFound,
           pmem_client.BadRequest)
NAMESPACE_HEADER = b"x-pmem-namespace"
#: The namespace the request being served names (an application token's session), if any.
_named: ContextVar[str | None] = ContextVar("pmem_mcp_namespace", default=None)


class ClientPool:
    """One :class:`AsyncClient` per token (its connections are reused from call to call)
    and the identities of the tokens verified lately. Bounded: the least recently used
    client is closed."""

    def __init__(self, api_url: str) -> None:
        self.api_url = api_url
        self._clients: OrderedDict[str, AsyncClient] = OrderedDict()
        self._verified: dict[str, tuple[float, Whoami]] = {}
        self._closing: set[asyncio.Task[None]] = set()  # evicted clients being closed

    @staticmethod
    def _id(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    def client(self, token: str, namespace: str | None = None) -> AsyncClient:
        key = self._id(token) + (f"/{namespace}" if namespace else "")
        found = self._clients.get(key)
        if found is not None:
            self._clients.move_to_end(key)
            return found
        made = AsyncClient(self.api_url, token, channel="mcp", namespace=namespace)
        self._clients[key] = made
        while len(self._clients) > MAX_CLIENTS:
            old_key, old = self._clients.popitem(last=False)
            self._verified.pop(old_key, None)
            task = asyncio.get_running_loop().create_task(old.aclose())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
        return made

    async def verify_token(self, token: str) -> AccessToken | None:
        """The SDK's ``TokenVerifier``: the token's identity from ``whoami``, else None."""
        key = self._id(token)
        verified = self._verified.get(key)
        if verified is None or verified[0] < time.monotonic():
            try:
                who = await self.client(token).whoami()
            except REFUSED:
                self._verified.pop(key, None)
                client = self._clients.pop(key, None)
                if client is not None:
                    await client.aclose()
                return None
            verified = self._verified[key] = (time.monotonic() + VERIFIED_FOR_S, who)
        who = verified[1]
        return AccessToken(token=token, client_id=f"{who.namespace}/{who.client}",
                           scopes=[who.scope], claims={"namespace": who.namespace})

    def current(self) -> AsyncClient:
        """The client of the agent whose request is being served."""
        access = get_access_token()
        if access is None:  # the bearer middleware lets no request without one through
            raise PermissionError("no authenticated token in this request")
        return self.client(access.token, _named.get())


class NamedNamespace:
    """Keeps the request's ``X-Pmem-Namespace`` for the tools it runs (:data:`_named`)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        named = None
        if scope["type"] == "http":
            named = next((v.decode("latin-1") for k, v in scope.get("headers") or ()
                          if k.lower() == NAMESPACE_HEADER), None)
        reset = _named.set(named or None)
        try:
            await self.app(scope, receive, send)
        finally:
            _named.reset(reset)


class ApiUnavailable:
    """Answers 503 (with ``Retry-After``) when the API cannot be reached to verify a token.

    The token is verified inside Starlette's authentication middleware, where an exception
    becomes a 500 page (sent by Starlette's outermost middleware, which then re-raises). So a
    500 is held back here until the request ends: replaced by a 503 when what was raised is
    the API being unreachable, passed on unchanged otherwise."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        held: list[Message] = []

        async def holding(message: Message) -> None:
            if held or (message["type"] == "http.response.start" and message["status"] == 500):
                held.append(message)
            else:
                await send(message)

        try:
            await self.app(scope, receive, holding)
        except pmem_client.TransportError as exc:
            if not held:
                raise
            body = json.dumps({"error": f"the P-Mem API is unreachable: {exc}"}).encode()
            await send({"type": "http.response.start", "status": 503,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"retry-after", b"1")]})
            await send({"type": "http.response.body", "body": body})
            return
        except BaseException:
            for message in held:
                await send(message)
            raise
        for message in held:
            await send(message)


def create_app(api_url: str) -> ASGIApp:
    """The streamable HTTP app: ``/mcp``, bearer tokens verified through ``api_url``."""
    pool = ClientPool(api_url)
    server = build_server(pool.current, token_verifier=pool,
                          auth=AuthSettings(issuer_url=api_url, resource_server_url=None))
    # DNS-rebinding protection stays on (the SDK's default for a server bound to localhost).
    return NamedNamespace(ApiUnavailable(server.streamable_http_app(
        streamable_http_path=MCP_PATH, host="127.0.0.1")))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m pmem_mcp",
                                     description="P-Mem's MCP server over streamable HTTP")
    parser.add_argument("--port", type=int,
                        default=int(os.environ.get("PMEM_MCP_PORT") or DEFAULT_PORT))
    parser.add_argument("--api-url", default=os.environ.get("PMEM_MCP_API_URL") or
                        f"http://127.0.0.1:{os.environ.get('PMEM_PORT') or 8000}",
                        help="the P-Mem web server the tools call (default: PMEM_PORT's)")
    args = parser.parse_args(argv)
    # Open MCP sessions hold a stream each: Ctrl-C must not wait on them for long.
    uvicorn.run(create_app(args.api_url), host="127.0.0.1", port=args.port,
                log_level=os.environ.get("PMEM_MCP_LOG_LEVEL", "warning").lower(),
                timeout_graceful_shutdown=3)
