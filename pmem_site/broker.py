"""kombu's Redis transport, with the guard its channel lacks when a broken connection is
torn down.

When the broker goes away while a worker holds an unacknowledged message and a ``BRPOP`` is
in flight, Celery's consumer collects the connection (the channel's close fails on the dead
socket, the transport is detached from its connection) and then closes it again. The second
close restores the unacknowledged message, which asks the detached transport for its
connection parameters: ``AttributeError`` on ``None``, which Celery does not count as a
connection error, so the worker exits with "Unrecoverable error" instead of reconnecting
(and ``make run`` stops with it). Here the channel answers that case with the connection
error it is: the close is abandoned as any close on a dead broker is, and the consumer
reconnects. Nothing is lost by not restoring the message: the broker keeps it in its
unacknowledged set and hands it out again after ``PMEM_VISIBILITY_TIMEOUT``, and a broker
restarted empty lost it anyway — the sweep queues every unsettled observation again.
"""

from __future__ import annotations

from typing import Any

from kombu.transport import TRANSPORT_ALIASES
from kombu.transport import redis as kombu_redis
from redis.exceptions import ConnectionError as RedisConnectionError


class Channel(kombu_redis.Channel):
    def _connparams(self, asynchronous: bool = False) -> Any:
        if self.connection.client is None:  # the transport was detached from its connection
            raise RedisConnectionError("the broker connection was closed")
        return super()._connparams(asynchronous=asynchronous)


class Transport(kombu_redis.Transport):
    Channel = Channel


def use_for_redis_urls() -> None:
    """Make ``redis://``, ``rediss://`` and ``redis+socket://`` URLs (``REDIS_URL``, the
    embedded broker) resolve to this transport in this process. Called before any
    connection is made: kombu caches a scheme's transport class at its first use."""
    for scheme in ("redis", "rediss"):
        TRANSPORT_ALIASES[scheme] = f"{__name__}:Transport"
