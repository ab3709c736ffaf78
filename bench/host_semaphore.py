"""The model-concurrency cap's semaphore, measured against the alternatives a library or the
broker offers: what one acquire + release costs a caller on this host (no contention), for
the flock slots of ``memory.llm.hostslots`` and for a counting semaphore on Redis (the
broker: one Lua script to take a slot, one call to give it back — the fewest round trips a
Redis semaphore can have). Prints a JSON report.

    PYTHONPATH=. PMEM_DATA_DIR=var/test python bench/host_semaphore.py [--n 5000]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

TAKE = """
if redis.call('INCR', KEYS[1]) <= tonumber(ARGV[1]) then return 1 end
redis.call('DECR', KEYS[1]); return 0
"""


def flock_cost(n: int) -> float:
    from memory.llm.hostslots import HostSemaphore

    with tempfile.TemporaryDirectory() as tmp:
        sem = HostSemaphore(Path(tmp), 8)
        started = time.perf_counter()
        for _ in range(n):
            sem.acquire()
            sem.release()
        return (time.perf_counter() - started) / n


def redis_cost(n: int) -> float:
    import django
    import redis

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pmem_site.settings")
    django.setup()
    from django.conf import settings

    # kombu's "redis+socket://PATH" is redis-py's "unix://PATH".
    client = redis.Redis.from_url(settings.REDIS_URL.replace("redis+socket://", "unix://", 1))
    take = client.register_script(TAKE)
    key = "pmem:bench:slots"
    client.delete(key)
    started = time.perf_counter()
    for _ in range(n):
        assert take(keys=[key], args=[8]) == 1
        client.decr(key)
    return (time.perf_counter() - started) / n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=5000)
    n = parser.parse_args().n
    flock_us, redis_us = flock_cost(n) * 1e6, redis_cost(n) * 1e6
    print(json.dumps({"n": n, "flock_us": round(flock_us, 1), "redis_us": round(redis_us, 1),
                      "redis_over_flock": round(redis_us / flock_us, 1)}))


if __name__ == "__main__":
    main()
