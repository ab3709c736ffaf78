"""The threads a worker process prepares observations on ahead of their commit
(memory.services.ingest.ahead): extractions on one pool, plans on another.

Plans have threads of their own: most make no call and take milliseconds, and the head of a
line waits on its plan, so one must not queue behind the extractions (a second each) that
the process's other lines — adopted namespaces — keep the extraction threads busy with.
Both kinds share the host's cap on calls in flight (memory.llm.hostslots).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Literal

from django.conf import settings

_lock = threading.Lock()
_pools: dict[str, tuple[int, int, ThreadPoolExecutor]] = {}  # kind -> (pid, size, pool)


def depth(width: int) -> int:
    """The extractions a line may have started at once, for ``width`` calls in flight: more,
    as each also spends time here (storing the answer, embedding its facts) without the
    call's slot, which the next one takes meanwhile; the host's cap on calls
    (memory.llm.hostslots) keeps the calls to ``width``."""
    return width + width // 2


def pool(kind: Literal["extract", "plan"]) -> ThreadPoolExecutor:
    """This process's threads of one kind (made after a fork, never inherited)."""
    width = int(settings.PMEM_MODEL_CONCURRENCY)
    size = depth(width) if kind == "extract" else width
    with _lock:
        made = _pools.get(kind)
        if made is None or made[0] != os.getpid() or made[1] != size:
            made = _pools[kind] = (os.getpid(), size, ThreadPoolExecutor(
                max_workers=size, thread_name_prefix=f"pmem-{kind}"))
        return made[2]
