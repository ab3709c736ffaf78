"""The HTTP client of the model endpoints: every segment a model server sends is acknowledged
at once.

A server that writes its status line and headers in one ``send`` and the body in a second,
with Nagle's algorithm on (Python's ``http.server`` does both, and so do many small
OpenAI-compatible servers), holds the body until the headers' segment is acknowledged; Linux
delays that acknowledgement by up to 40 ms on a connection it sees as interactive. Every
model call then costs 40 ms more than the model took: measured against the bench's scripted
server, 44 ms a call instead of 1.6 ms, so a drain keeping 8 calls of a second in flight lost
4 % of the server's slots to the wait alone. Asking the kernel to acknowledge at once
(``TCP_QUICKACK``) before each read ends the wait whatever the server does. The flag does not
stay set (the kernel goes back to delaying by its own rules), so it is set again before every
read: one ``setsockopt`` against a call of a second.

Servers that turn Nagle off (uvicorn, so vLLM and llama-cpp-python's server) lose nothing to
this and gain nothing from it. Where the platform has no ``TCP_QUICKACK`` (it is Linux's),
streams are left as they are.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore2
import httpx2
import openai

_QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)


class QuickAckStream(httpcore2.NetworkStream):
    """A TCP stream that asks for an immediate acknowledgement before each read."""

    def __init__(self, inner: httpcore2.NetworkStream) -> None:
        self._inner = inner
        sock = inner.get_extra_info("socket")
        self._sock: socket.socket | None = sock if isinstance(sock, socket.socket) else None

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        if self._sock is not None and _QUICKACK is not None:
            try:
                self._sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
            except OSError:  # closed under us: the read below says so in httpcore2's terms
                pass
        return self._inner.read(max_bytes, timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore2.NetworkStream:
        return QuickAckStream(self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class QuickAckBackend(httpcore2.SyncBackend):
    """httpcore2's blocking backend, its TCP streams wrapped in :class:`QuickAckStream`."""

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore2.NetworkStream:
        stream = super().connect_tcp(host, port, timeout, local_address, socket_options)
        return QuickAckStream(stream) if _QUICKACK is not None else stream


class QuickAckTransport(httpx2.HTTPTransport):
    """httpx2's transport over :class:`QuickAckBackend`. httpx2 takes no network backend, so its
    connection pool is made again, with the same settings and this backend."""

    def __init__(self, *, limits: httpx2.Limits) -> None:
        super().__init__(limits=limits)
        self._pool = httpcore2.ConnectionPool(
            ssl_context=httpx2.create_ssl_context(),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=QuickAckBackend())


def http_client() -> httpx2.Client:
    """The SDK's default client (its timeouts, limits and redirects) on
    :class:`QuickAckTransport`. Proxies named in the environment still apply: httpx2 mounts
    its own transports for them."""
    transport = QuickAckTransport(limits=openai.DEFAULT_CONNECTION_LIMITS)
    return openai.DefaultHttpxClient(transport=transport)
