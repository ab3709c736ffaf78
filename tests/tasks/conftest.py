"""Task tests: real Celery workers, real PostgreSQL and Redis, the model behind real HTTP."""

from __future__ import annotations

from tests.support.worker import (  # noqa: F401 - fixtures
    _session_llm_worker,
    celery_worker_proc,
    llm_server,
    llm_worker,
)
