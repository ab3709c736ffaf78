"""What :class:`~pmem_client.Client` and :class:`~pmem_client.AsyncClient` share that neither
sends: configuration, the namespace, what a reply means, and when to try again."""

from __future__ import annotations

from typing import Any, TypeVar

import httpx2

from . import _protocol as p
from . import errors
from .types import Whoami

T = TypeVar("T")
#: Failures where the request may not have reached the server, or its answer was lost: retried.
RETRIED_TRANSPORT = (httpx2.TimeoutException, httpx2.NetworkError, httpx2.RemoteProtocolError)
DEFAULT_TIMEOUT = 60.0  # above the server's 30 s wait=1, so a waiting remember is not cut off
WAIT_TIMEOUT = 120.0  # how long remember/retract/... poll an observation the server left pending


class ClientBase:
    """What both clients share: configuration, the namespace, and the retry decisions."""

    def __init__(self, base_url: str, token: str, *, namespace: str | None,
                 retry: p.Retry | None, channel: str, wait_timeout: float) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError("base_url is the server's root, e.g. http://127.0.0.1:8000")
        self.base_url = base_url.rstrip("/") + "/"
        self.retry = retry or p.Retry()
        self.wait_timeout = wait_timeout
        self._namespace = namespace
        self._prefix = ""  # an application token's, once whoami said so
        self._headers = {"Authorization": f"Token {token}", "Accept": "application/json",
                         "X-Pmem-Channel": channel, "User-Agent": "pmem-client"}

    def _outcome(self, response: httpx2.Response, attempt: int) -> p.Reply | float:
        """The reply, or how long to wait before the next try; raises when it is final."""
        retry_after = p.retry_after_seconds(response.headers.get("retry-after"))
        if response.status_code in p.RETRY_STATUSES and attempt < self.retry.attempts:
            return self.retry.delay(attempt, retry_after)
        body = p.parse_body(response.content, response.headers.get("content-type", ""))
        if response.status_code >= 400:
            raise errors.error_for(response.status_code, body, retry_after=retry_after)
        return p.Reply(response.status_code, body)

    def _transport_failed(self, exc: Exception, call: p.Call, attempt: int) -> float:
        if attempt < self.retry.attempts:
            return self.retry.delay(attempt)
        what = f"{call.method} {call.url}"
        if isinstance(exc, httpx2.TimeoutException):
            raise errors.Timeout(f"{what}: no answer after {attempt} tries ({exc})") from exc
        raise errors.TransportError(f"{what}: failed after {attempt} tries ({exc})") from exc

    def _learn(self, who: Whoami) -> Whoami:
        """Remember what ``whoami`` said: the token's namespace, unless one was given."""
        if self._namespace is None and who.namespace:
            self._namespace = who.namespace
        self._prefix = who.namespace_prefix
        return who

    def _require_namespace(self) -> str:
        if self._namespace is not None:
            return self._namespace
        if self._prefix:
            raise errors.PmemError(
                f"this application token reaches the namespaces whose names start with "
                f"{self._prefix!r}: name one (namespace=... on the client or the call)")
        raise errors.PmemError("the namespace is not known yet: use `async with`, await "
                               "whoami() first, or pass namespace=...")

    @staticmethod
    def _request(call: p.Call) -> dict[str, Any]:
        out: dict[str, Any] = {"params": call.params}
        if call.json is not None:
            out["json"] = call.json
        return out


