"""``celery -A bench.perf_worker worker``: the project's Celery app, for the perf benchmark.

The settings read no ``PMEM_RULE_PATTERNS`` from the environment, so a worker process started
by the benchmark would not know the FactConsolidation templates; this module installs the file
named by ``PMEM_BENCH_RULE_PATTERNS`` before the worker forks its pool. Everything else is the
unchanged ``pmem_site.celery`` app and the unchanged tasks.
"""

from __future__ import annotations

import os

from pmem_site.celery import app

_patterns = os.environ.get("PMEM_BENCH_RULE_PATTERNS", "")
if _patterns:
    from django.conf import settings

    settings.PMEM_RULE_PATTERNS = _patterns

__all__ = ["app"]
