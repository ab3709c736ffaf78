"""``make run``: embedded services, migrations, demo data, a Celery worker and the web server.

Stays in the foreground; Ctrl-C (SIGINT) or SIGTERM stops everything it started, including
the embedded PostgreSQL and Redis when it was the one to use them (no DATABASE_URL/REDIS_URL).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pmem_site import embedded

BASE_DIR = Path(__file__).resolve().parent.parent


def _manage(*args: str) -> None:
    subprocess.run([sys.executable, "manage.py", *args], cwd=BASE_DIR, check=True)


def _demo_credentials() -> str:
    out = subprocess.run([sys.executable, "manage.py", "pmem_demo", "--print-token"],
                         cwd=BASE_DIR, check=True, capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


def mcp_command(port: int, api_url: str) -> list[str]:
    """The MCP server (streamable HTTP at /mcp) beside the web server, calling its API.
    Tests start it with this same command line."""
    return [sys.executable, "-m", "pmem_mcp", "--port", str(port), "--api-url", api_url]


#: The access log: method, path and protocol, never the query string (a search for a value,
#: later erased, would stay in it) nor the referer (the explorer's pages carry queries too);
#: docs/operations.md, "Logs".
ACCESS_LOG_FORMAT = '%(h)s %(l)s %(u)s %(t)s "%(m)s %(U)s %(H)s" %(s)s %(b)s %(L)s "%(a)s"'


def web_command(port: int, control_socket: Path | None = None) -> list[str]:
    """gunicorn serving the site, its own refusals (a request line or headers past its
    limits) answered in JSON like every other error (pmem_site.web_worker), with this
    instance's own control socket (not ~/.gunicorn, shared by every instance; default: in
    the data directory). Tests start it with this same command line."""
    from pmem_site.web_worker import LIMITS

    control = control_socket or embedded.data_dir() / "gunicorn.ctl"
    return [sys.executable, "-m", "gunicorn", "pmem_site.wsgi:application", "--bind",
            f"127.0.0.1:{port}", "--workers", os.environ.get("PMEM_WEB_WORKERS", "2"),
            "--threads", "4", "--worker-class", "pmem_site.web_worker.JsonErrorWorker",
            "--timeout", "120", "--graceful-timeout", "5", "--access-logfile", "-",
            "--access-logformat", ACCESS_LOG_FORMAT, "--control-socket", str(control),
            *(part for option in LIMITS.items() for part in option)]


def _model_summary() -> list[str]:
    """The model, its structured-output form and whether the embeddings endpoint answered
    (``pmem_model check --summary``). Never fails: a model that is down, slow or wrong makes
    observations wait or fail visibly, it does not stop the stack."""
    try:
        out = subprocess.run([sys.executable, "manage.py", "pmem_model", "check", "--summary",
                              "--timeout", "30"], cwd=BASE_DIR, capture_output=True, text=True,
                             timeout=180)
        return out.stdout.strip().splitlines() or [f"Model: check failed: {out.stderr[-300:]}"]
    except subprocess.TimeoutExpired:
        return ["Model: no answer from the model check within 180 s"]


def _start_local_model() -> Any:
    """``PMEM_LLM=local``: the bundled small model beside the stack (pmem_site.local_model)."""
    from pmem_site.local_model import LocalModelServer

    print("P-Mem: starting the bundled SmolLM2-135M server (PMEM_LLM=local) ...", flush=True)
    server = LocalModelServer(log_path=Path(os.environ.get("PMEM_DATA_DIR", "var"))
                              / "local-model.log").start()
    use_local_model(server.base_url, server.model)
    return server


def use_local_model(base_url: str, model: str) -> None:
    """Point the stack at the bundled model. It answers one request at a time (one thread on
    a CPU), so one call in flight unless said otherwise: eight would only queue there, each
    waiting behind the others' answers until the client's timeout gives up on it."""
    os.environ["PMEM_LLM_BASE_URL"], os.environ["PMEM_LLM_MODEL"] = base_url, model
    os.environ.setdefault("PMEM_MODEL_CONCURRENCY", "1")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _https_refusal() -> str | None:
    """PMEM_HTTPS=1 means a deployment behind TLS: refuse to start it with the development
    secret key (the one used when PMEM_SECRET_KEY is unset), before anything is started."""
    https = os.environ.get("PMEM_HTTPS", "").strip().lower() in {"1", "true", "yes", "on"}
    if https and not os.environ.get("PMEM_SECRET_KEY", "").strip():
        return ("P-Mem: PMEM_HTTPS=1 needs a real secret key; refusing the development one. "
                "Set PMEM_SECRET_KEY (e.g. python -c 'import secrets; "
                "print(secrets.token_urlsafe(50))') and PMEM_ALLOWED_HOSTS.")
    return None


def main() -> int:
    refusal = _https_refusal()
    if refusal:
        print(refusal, file=sys.stderr, flush=True)
        return 2
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pmem_site.settings")
    embedded_db = not os.environ.get("DATABASE_URL")
    embedded_broker = not os.environ.get("REDIS_URL")
    port = int(os.environ.get("PMEM_PORT", "8000"))
    mcp_port = int(os.environ.get("PMEM_MCP_PORT", "8001"))
    print(f"P-Mem: data in {embedded.data_dir()}", flush=True)
    embedded.start()
    # Everything that writes metrics starts here: the files of earlier runs' processes go.
    shutil.rmtree(embedded.data_dir() / "metrics", ignore_errors=True)
    children: list[subprocess.Popen[bytes]] = []
    local_model: list[Any] = []

    def stop() -> None:
        # A second Ctrl-C (the terminal sends one to every process) must not cut this short.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.time() + 15
        for child in children:
            try:
                child.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                child.kill()
        for server in local_model:
            server.stop()
        if embedded_db or embedded_broker:
            embedded.stop()
        print("P-Mem stopped.", flush=True)

    try:
        if os.environ.get("PMEM_LLM", "").strip().lower() == "local":
            local_model.append(_start_local_model())
        _manage("migrate", "--no-input", "-v", "0")
        # Namespaces whose vectors another embedder made (an older data directory, a changed
        # PMEM_EMBEDDER) are re-embedded before anything serves them (a cosine
        # between two embedders' vectors ranks nothing).
        _manage("pmem_reembed")
        _manage("collectstatic", "--no-input", "-v", "0")
        token = _demo_credentials()
        model_lines = _model_summary()
        children.append(subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "pmem_site", "worker", "-Q",
             os.environ.get("PMEM_QUEUE", "pmem"), "--concurrency",
             os.environ.get("PMEM_WORKERS", "2"), "--loglevel", "INFO", "-n", "pmem@%h",
             # beat inside the worker: the sweep, the periodic frontier-index flush
             "--beat", "--schedule", str(embedded.data_dir() / "celerybeat-schedule")],
            cwd=BASE_DIR))
        children.append(subprocess.Popen(web_command(port), cwd=BASE_DIR))
        children.append(subprocess.Popen(mcp_command(mcp_port, f"http://127.0.0.1:{port}"),
                                         cwd=BASE_DIR))
        print("\n" + "=" * 64, flush=True)
        print(f"  P-Mem is up:   http://127.0.0.1:{port}/", flush=True)
        print("  Explorer login: demo / demo  (reviewer of namespace 'demo')", flush=True)
        print(f"  Demo API token: {token}", flush=True)
        print(f"  API docs:       http://127.0.0.1:{port}/api/docs/", flush=True)
        print(f"  MCP (agents):   http://127.0.0.1:{mcp_port}/mcp  (Bearer <api token>)",
              flush=True)
        for line in model_lines:
            print(f"  {line}", flush=True)
        print("  Ctrl-C stops everything.", flush=True)
        print("=" * 64 + "\n", flush=True)
        signal.signal(signal.SIGTERM, _interrupt)
        while all(child.poll() is None for child in children):
            time.sleep(0.5)
        print("P-Mem: a child process exited; stopping.", flush=True)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        stop()


if __name__ == "__main__":
    sys.exit(main())
