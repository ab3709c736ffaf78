from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from celery import Celery
from celery.signals import beat_init, celeryd_after_setup, worker_init, worker_ready

from . import broker

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pmem_site.settings")

broker.use_for_redis_urls()  # a broker restart must not end the worker (see the module)
app = Celery("pmem")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
@beat_init.connect
def _start_embedded_services(**_: Any) -> None:
    """A worker or beat started on its own (not by `make run`) starts the embedded services
    it needs, or joins the running ones."""
    # Imported here, not at the top: the package imports this module, and
    # `python -m pmem_site.embedded stop` would then find its own module imported twice.
    from . import embedded

    embedded.start()


@worker_init.connect
def _share_model_calls_per_host(**_: Any) -> None:
    """A worker's processes (the pool forks from this one) share one cap on model calls in
    flight: ``PMEM_MODEL_CONCURRENCY`` is per worker host, whatever ``PMEM_WORKERS`` is."""
    from django.conf import settings

    from memory.llm.configured import share_calls_per_host

    share_calls_per_host(Path(settings.PMEM_DATA_DIR) / "run" / "model-slots")


@worker_ready.connect
def _serve_metrics(**_: Any) -> None:
    """``PMEM_METRICS_PORT``: a worker host of its own serves its processes' metrics there
    (``GET /metrics``; the web's /metrics shows them when both share a data directory)."""
    from django.conf import settings

    port = settings.PMEM_METRICS_PORT
    if port:
        from .metrics import serve_worker_metrics

        serve_worker_metrics(port, settings.PMEM_METRICS_BIND)


#: The queue beside each of a worker's queues that webhook deliveries go to.
DELIVERIES_SUFFIX = "-webhooks"


@celeryd_after_setup.connect
def _consume_deliveries(instance: Any, **_: Any) -> None:
    """Every worker also consumes the deliveries' queue beside each of its queues (whatever
    ``-Q`` said): a commit's wake-up then waits its turn beside the observations' messages
    (Redis takes the queues in turn), not behind every one queued before it."""
    queues = instance.app.amqp.queues
    for name in list(queues.consume_from or {}):
        if not name.endswith(DELIVERIES_SUFFIX):
            queues.select_add(name + DELIVERIES_SUFFIX)
