"""One webhook POST, safe from server-side request forgery.

The host is resolved here and every address it resolves to is judged
(:func:`memory.domain.webhooks.refused_address`); the connection then goes to the address that
was judged, never to a second lookup of the name (a name that answers a public address to the
check and a private one to the connect — DNS rebinding — gains nothing). Redirects are not
followed (a 3xx is a failed delivery), the connect and each read have short timeouts, and the
whole attempt ends at the total timeout.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import time
from dataclasses import dataclass

from memory.domain.webhooks import IPAddress, Target, TargetRefused, parse_target, refused_address


@dataclass(frozen=True)
class Answer:
    """What one attempt came to: ``outcome`` is a WebhookDelivery.Outcome value."""

    outcome: str
    status: int | None = None
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome == "delivered"


def checked_addresses(target: Target, *, allow_private: bool) -> list[IPAddress]:
    """The addresses ``target``'s host resolves to, or :class:`TargetRefused` when it resolves
    to none or to any that must not be called (one bad answer refuses the name: a resolver
    may hand out its answers in any order)."""
    try:
        literal: IPAddress | None = ipaddress.ip_address(target.host)
    except ValueError:
        literal = None
    if literal is not None:
        found = [literal]
    else:
        try:
            infos = socket.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            raise TargetRefused(f"{target.host} does not resolve: {exc}") from None
        found = list(dict.fromkeys(ipaddress.ip_address(str(info[4][0]).split("%")[0])
                                   for info in infos))
    if not found:
        raise TargetRefused(f"{target.host} resolves to no address")
    for address in found:
        reason = refused_address(address, allow_private=allow_private)
        if reason is not None:
            raise TargetRefused(f"{target.host} resolves to a {reason} ({address}); "
                                "set PMEM_WEBHOOK_ALLOW_PRIVATE=1 to allow it")
    return found


def check_url(url: str, *, allow_private: bool) -> Target:
    """The URL's target when it may be called now (:class:`TargetRefused` otherwise)."""
    target = parse_target(url)
    checked_addresses(target, allow_private=allow_private)
    return target


class _PinnedHTTP(http.client.HTTPConnection):
    """An HTTP connection to one checked address; Host stays the URL's host."""

    def __init__(self, target: Target, address: IPAddress, connect_timeout: float,
                 timeout: float) -> None:
        super().__init__(target.host, target.port, timeout=timeout)
        self._address = str(address)
        self._connect_timeout = connect_timeout

    def _open(self) -> socket.socket:
        sock = socket.create_connection((self._address, self.port), self._connect_timeout)
        sock.settimeout(self.timeout)
        return sock

    def connect(self) -> None:
        self.sock = self._open()


class _PinnedHTTPS(_PinnedHTTP):
    """The same over TLS; the certificate is checked against the URL's host name."""

    def connect(self) -> None:
        context = ssl.create_default_context()
        self.sock = context.wrap_socket(self._open(), server_hostname=self.host)


def post(url: str, body: bytes, headers: dict[str, str], *, allow_private: bool,
         connect_timeout: float, timeout: float) -> Answer:
    """POST ``body`` to ``url`` (checked again now: a name may resolve elsewhere than when
    the endpoint was made). Never raises for what the target does."""
    try:
        target = parse_target(url)
        address = checked_addresses(target, allow_private=allow_private)[0]
    except TargetRefused as exc:
        return Answer("refused", error=str(exc))
    kind = _PinnedHTTPS if target.scheme == "https" else _PinnedHTTP
    conn = kind(target, address, min(connect_timeout, timeout), timeout)
    deadline = time.monotonic() + timeout
    try:
        conn.request("POST", target.path, body=body, headers=headers)
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the total timeout passed")
        if conn.sock is not None:
            conn.sock.settimeout(left)
        response = conn.getresponse()
        response.read(65_536)  # a short read: the answer's body is not kept
        status = response.status
    except TimeoutError as exc:
        return Answer("timeout", error=f"timed out: {exc}")
    except (OSError, http.client.HTTPException, ssl.SSLError) as exc:
        return Answer("unreachable", error=f"{type(exc).__name__}: {exc}"[:500])
    finally:
        conn.close()
    if 200 <= status < 300:
        return Answer("delivered", status=status)
    return Answer("failed", status=status, error=f"HTTP {status}")
