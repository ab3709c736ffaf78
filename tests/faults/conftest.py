"""The fault suite's stack: one PostgreSQL cluster (on a small tmpfs when this machine lets us
mount one, so that a test can fill its disk) and a migrated database for the module; for
each test a Redis, a gunicorn and a Celery worker with beat, optionally the scripted model."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.scripted_llm import ScriptedLLM
from tests.support.stack import (
    PgCluster,
    RedisServer,
    Service,
    app_env,
    celery_worker,
    free_port,
    gunicorn,
    manage,
    rmtree,
    wait_web_ready,
    wait_worker_ready,
)

ROOT = Path(__file__).resolve().parents[2]
#: Where the suite's figures go (docs/operations.md quotes them).
FIGURES = ROOT / "var" / "faults-figures"
TMPFS_MB = 320


def _mount_tmpfs(path: Path) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_MB}m,mode=0755", "tmpfs",
                           str(path)], capture_output=True)
    return done.returncode == 0


@dataclass
class Cluster:
    pg: PgCluster
    tmpfs: Path | None
    root: Path
    base_env: dict[str, str] = field(default_factory=dict)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    root = Path(os.environ.get("PMEM_DATA_DIR", ROOT / "var" / "test")) / f"faults-{uuid.uuid4().hex[:6]}"
    disk = root / "pgdisk"
    mounted = _mount_tmpfs(disk)
    pg = PgCluster(disk).init().start()
    try:
        pg.create_database()
        data = root / "migrate"
        data.mkdir(parents=True, exist_ok=True)
        env = app_env(data_dir=data, database_url=pg.url(), redis_url="redis://127.0.0.1:1/0",
                      queue="unused")
        manage(env, "migrate", "--no-input", "-v", "0")
        yield Cluster(pg=pg, tmpfs=disk if mounted else None, root=root)
    finally:
        pg.stop()
        if mounted:
            subprocess.run(["umount", "-l", str(disk)], capture_output=True)
        rmtree(root)


@dataclass
class Stack:
    cluster: Cluster
    redis: RedisServer
    web: Service
    worker: Service
    url: str
    env: dict[str, str]
    data: Path
    llm: ScriptedLLM | None
    services: list[Service] = field(default_factory=list)

    @property
    def dsn(self) -> str:
        return self.cluster.pg.dsn()

    def namespace(self, name: str) -> str:
        """A namespace and a write token for it (``pmem_namespace create``)."""
        out = manage(self.env, "pmem_namespace", "create", name)
        return str(json.loads(out.strip().splitlines()[-1])["token"])

    def new_worker(self, name: str) -> Service:
        worker = celery_worker(self.env, name=name, log=self.data / f"{name}.log")
        self.services.append(worker.start())
        wait_worker_ready(worker)
        return worker

    def logs(self) -> str:
        return (f"--- web ---\n{self.web.text()[-3000:]}\n--- worker ---\n"
                f"{self.worker.text()[-6000:]}")


@pytest.fixture(params=[False, True], ids=["no-model", "model"])
def with_model(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture
def stack_env() -> dict[str, str]:
    """More environment for the stack's services (a test module overrides it)."""
    return {}


@pytest.fixture
def stack(cluster: Cluster, with_model: bool, stack_env: dict[str, str],
          request: pytest.FixtureRequest) -> Iterator[Stack]:
    assert cluster.pg.alive or cluster.pg.start()
    data = cluster.root / f"stack-{uuid.uuid4().hex[:6]}"
    data.mkdir(parents=True)
    redis = RedisServer(data / "redis").start()
    llm = ScriptedLLM().start() if with_model else None
    queue = f"pmem-faults-{uuid.uuid4().hex[:6]}"
    env = app_env(data_dir=data, database_url=cluster.pg.url(), redis_url=redis.url(),
                  queue=queue, llm_url=llm.base_url if llm else "",
                  llm_model=llm.model if llm else "", **stack_env)
    port = free_port()
    web = gunicorn(env, bind=f"127.0.0.1:{port}", data_dir=data, log=data / "web.log").start()
    worker = celery_worker(env, name="w1", log=data / "w1.log").start()
    built = Stack(cluster, redis, web, worker, f"http://127.0.0.1:{port}", env, data, llm,
                  [web, worker])
    try:
        wait_web_ready(built.url, web)
        wait_worker_ready(worker)
        yield built
    finally:
        if request.node.rep_call.failed if hasattr(request.node, "rep_call") else False:
            print(built.logs())
        for service in built.services:
            service.stop()
        redis.stop()
        if llm is not None:
            with contextlib.suppress(Exception):
                llm.close()
        rmtree(data)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)
