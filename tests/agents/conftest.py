"""Agents' tests run against real servers: pytest-django's live server (the API in a thread of
this process, on the test database), a real Celery worker committing what it is sent, and the
MCP server in its own process, started the way ``make run`` starts it."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.mcp import mcp_http_process
from tests.support.worker import CeleryWorker, _test_db_name, llm_env, routed_to


@pytest.fixture(scope="session")
def _agents_worker(django_db_setup: None, django_db_blocker: Any) -> Iterator[CeleryWorker]:
    with django_db_blocker.unblock():
        worker = CeleryWorker(db_name=_test_db_name(), concurrency=2, env=llm_env(None))
    worker.start()
    try:
        yield worker
    finally:
        worker.stop()
        with django_db_blocker.unblock():
            _wait_for_other_sessions_to_end()


def _wait_for_other_sessions_to_end(timeout: float = 15.0) -> None:
    """PostgreSQL ends a killed client's backend a moment after the client: wait for the
    worker's (and the stdio servers') sessions to go, so that the test database can be
    dropped at the end of the run."""
    import time

    from django.db import connection

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with connection.cursor() as cur:
            cur.execute("SELECT count(*) FROM pg_stat_activity WHERE datname ="
                        " current_database() AND pid <> pg_backend_pid()")
            if not cur.fetchone()[0]:
                return
        time.sleep(0.2)


@pytest.fixture
def worker(transactional_db: None, _agents_worker: CeleryWorker) -> Iterator[CeleryWorker]:
    """The session's worker (no model: rule extractor), with this process's tasks routed to it."""
    if not _agents_worker.alive:
        _agents_worker.start()
    with routed_to(_agents_worker.queue):
        yield _agents_worker


@pytest.fixture
def api_url(live_server: Any, worker: CeleryWorker) -> str:
    """The live API's root URL, with a worker committing its observations."""
    return str(live_server.url)


@pytest.fixture
def agent(make_namespace: Callable[..., Any]) -> Callable[..., tuple[Any, str]]:
    """``agent(prefix, client="agent") -> (namespace, token)``: a namespace and a token of it."""
    from memory.services import token_create

    def make(prefix: str = "agent", client: str = "agent") -> tuple[Any, str]:
        ns = make_namespace(prefix)
        return ns, token_create(namespace=ns, client=client).key

    return make


@pytest.fixture(scope="session")
def mcp_url(live_server: Any) -> Iterator[str]:
    """The MCP server over streamable HTTP, in its own process, calling the live API."""
    with mcp_http_process(str(live_server.url),
                          Path(os.environ["PMEM_DATA_DIR"]) / "mcp-logs") as url:
        yield url


def stdio_env(worker: CeleryWorker) -> dict[str, str]:
    """The environment of ``manage.py pmem_mcp`` in a test: the test database and the test
    worker's queue."""
    return {**os.environ, "PMEM_TEST_DB_NAME": worker.db_name, "PMEM_QUEUE": worker.queue,
            "DJANGO_SETTINGS_MODULE": "pmem_site.settings", "PYTHONUNBUFFERED": "1"}
