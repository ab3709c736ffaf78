"""Where this process's model clients keep the host's slots (set when a worker starts): the
process-level half of the client's configuration, kept apart so that the modules a client is
built from can read it without importing the client."""

from __future__ import annotations

from pathlib import Path

# Where a worker process's clients keep the host's slots (set when a worker starts).
_HOST_SLOTS: list[Path] = []


def share_calls_per_host(root: Path) -> None:
    """From now on this process's clients share their cap on calls in flight with every
    process of the host that says the same (``memory.llm.hostslots``): a worker host's
    processes together keep at most ``PMEM_LLM_CONCURRENCY`` calls open. Web processes do
    not: a reader's request must not queue behind a backlog of ingest's calls."""
    _HOST_SLOTS[:] = [root]


def host_slots_root() -> Path | None:
    """Where this process's clients keep the host's slots; None: a cap per process."""
    return _HOST_SLOTS[0] if _HOST_SLOTS else None
