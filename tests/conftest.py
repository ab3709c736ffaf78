"""Shared fixtures. Tests run against the embedded PostgreSQL under var/test (see Makefile)."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

os.environ.setdefault("PMEM_DATA_DIR", str(Path(__file__).resolve().parent.parent / "var" / "test"))
# Tests run inside a transaction their own connection sees alone: the drain flushes the
# frontier index inline there (tests/services/test_frontier.py turns the background indexer on).
os.environ.setdefault("PMEM_FRONTIER_FLUSH_ASYNC", "0")
os.environ.setdefault("PMEM_EMBED_ASYNC", "0")
# The suite runs on the hashing embedder (microseconds a text, lexical): the semantic default
# costs ~10 ms a text on this suite's thousands of writes and reads. Its own tests turn it on
# (tests/llm/test_minilm.py, tests/api/test_recall.py); see docs/decisions.md.
os.environ.setdefault("PMEM_EMBEDDER", "hashing")

import pytest  # noqa: E402

_names = itertools.count(1)


def pytest_configure(config: pytest.Config) -> None:
    # Importing the settings starts nothing: the test session starts (or joins) the embedded
    # PostgreSQL and Redis under PMEM_DATA_DIR before pytest-django creates its database.
    from pmem_site import embedded

    embedded.start()
    # prometheus-client's files of earlier sessions' processes (one set per pid) go.
    embedded.prune_metrics()


@pytest.fixture(autouse=True)
def _inline_frontier_flush(settings):
    # Settings may be loaded before this file sets the environment: say it again here.
    settings.PMEM_FRONTIER_FLUSH_ASYNC = False
    settings.PMEM_EMBED_ASYNC = False
    settings.PMEM_EMBEDDER = "hashing"


@pytest.fixture(autouse=True)
def _settled_listener_closed():
    # A wait (``?wait=1``) opens this process's listening connection to the test database,
    # which must be closed before pytest-django drops that database.
    yield
    from memory.selectors.changes import LISTENER as CHANGES
    from memory.selectors.settled import LISTENER

    LISTENER.stop()
    CHANGES.stop()


@pytest.fixture
def make_namespace(db):
    from memory.services import namespace_create

    def make(prefix: str = "ns"):
        return namespace_create(name=f"{prefix}-{os.getpid()}-{next(_names)}")

    return make


@pytest.fixture
def ns(make_namespace):
    return make_namespace()
