"""Per-token API rate limits (CONTRACT: off unless ``PMEM_API_RATE`` is set, e.g. ``600/min``).

DRF's own throttle on the project's cache (Redis), keyed by token: an agent's burst is
legitimate, so nothing is limited by default. Over the rate, DRF answers 429 with
``Retry-After``. Session requests (a person in the explorer) are not limited here.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from redis.exceptions import RedisError
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from .auth import TokenClient

log = logging.getLogger("pmem.api")


class TokenRateThrottle(SimpleRateThrottle):
    scope = "token"

    def get_rate(self) -> str | None:
        # Read per request (not from DEFAULT_THROTTLE_RATES at import), so a deployment's
        # setting and a test's override both apply; None turns the throttle off.
        return settings.PMEM_API_RATE

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        user = request.user
        if not isinstance(user, TokenClient):
            return None
        # The digest, not the row id: ids repeat across databases that share one Redis.
        return self.cache_format % {"scope": self.scope, "ident": user.token.digest}

    def allow_request(self, request: Request, view: Any) -> bool:
        # A limit is a courtesy to the server, not a lock: if the cache cannot count, the
        # request goes through (logged) rather than fail with a 500.
        try:
            return super().allow_request(request, view)
        except RedisError:
            log.warning("rate limit not applied: the cache is unreachable", exc_info=True)
            return True
