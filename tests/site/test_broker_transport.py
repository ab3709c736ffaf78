"""The broker transport keeps a worker alive when its connection is torn down under an
unacknowledged message (pmem_site.broker): the close that Celery's consumer makes after
collecting a broken connection ends in a connection error, which it ignores and reconnects
after, not in an AttributeError, which ends the worker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kombu import Connection, Exchange, Queue
from kombu.common import ignore_errors

from pmem_site.broker import Transport
from tests.support.stack import RedisServer


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.kill()


def _holding_an_unacked_message(url: str) -> Connection:
    connection = Connection(url)
    queue = Queue("pmem-transport-test", Exchange("pmem-transport-test"), "t")
    with connection.Producer() as producer:
        producer.publish({"n": 1}, exchange=queue.exchange, routing_key="t", declare=[queue])
    message = connection.default_channel.basic_get(queue.name, no_ack=False)
    assert message is not None and connection.default_channel.qos._delivered
    return connection


def test_redis_urls_resolve_to_the_guarded_transport(redis_server: RedisServer) -> None:
    import pmem_site  # noqa: F401 - the app registers the transport when it is imported

    for url in (redis_server.url(), "redis+socket:///tmp/pmem-none.sock",
                "rediss://127.0.0.1:1/0"):
        assert isinstance(Connection(url).transport, Transport), url


def test_closing_a_collected_connection_with_an_unacked_message_is_a_connection_error(
        redis_server: RedisServer) -> None:
    import pmem_site  # noqa: F401

    connection = _holding_an_unacked_message(redis_server.url())
    channel = connection.default_channel
    redis_server.kill()  # the broker goes away
    # What the consumer's collect leaves when the channel's close failed on the dead socket
    # (a BRPOP was in flight): the channel still open, the transport detached.
    connection._do_close_transport()
    ignore_errors(connection, connection.close)  # an AttributeError would escape this
    assert channel.closed
