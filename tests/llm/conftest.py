"""Fixtures for the model-facing tests: no database, a real HTTP scripted model server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from memory.llm.client import ModelClient, endpoint_forms
from tests.support.scripted_llm import ScriptedLLM, scripted_llm  # noqa: F401 - fixture

ClientFactory = Callable[..., ModelClient]


@pytest.fixture
def make_client(scripted_llm: ScriptedLLM) -> ClientFactory:  # noqa: F811
    """Build a client against the scripted server with test-speed retries."""

    def build(**overrides: Any) -> ModelClient:
        options: dict[str, Any] = {
            "base_url": scripted_llm.base_url,
            "model": "scripted",
            "timeout": 5.0,
            "max_retries": 2,
            "concurrency": 8,
            "backoff_base": 0.01,
            "backoff_cap": 0.05,
        }
        options.update(overrides)
        return ModelClient(**options)

    return build


@pytest.fixture(autouse=True)
def _forget_negotiated_forms() -> None:
    """Each test negotiates structured output afresh (a port may be reused)."""
    endpoint_forms.clear()
