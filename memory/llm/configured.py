"""The model client the settings describe (``PMEM_LLM_*``, ``PMEM_EMBED_*``), or none."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .client import ModelClient

_CHAT_MODEL_OFF: ContextVar[bool] = ContextVar("pmem_chat_model_off", default=False)

# Where a worker process's clients keep the host's slots (set when a worker starts).
_HOST_SLOTS: list[Path] = []


def share_calls_per_host(root: Path) -> None:
    """From now on this process's clients share their cap on calls in flight with every
    process of the host that says the same (``memory.llm.hostslots``): a worker host's
    processes together keep at most ``PMEM_LLM_CONCURRENCY`` calls open. Web processes do
    not: a reader's request must not queue behind a backlog of ingest's calls."""
    _HOST_SLOTS[:] = [root]


def host_slots_root() -> Path | None:
    """Where this process's clients keep the host's slots; None: a cap per process."""
    return _HOST_SLOTS[0] if _HOST_SLOTS else None


@contextmanager
def chat_model_off() -> Iterator[None]:
    """Within this block (this thread or task) :func:`client_from_settings` answers None, as
    if no chat model were configured: the demo histories are written this way, so what they
    hold never depends on a model (docs/decisions.md, "The demo never asks a model")."""
    token = _CHAT_MODEL_OFF.set(True)
    try:
        yield
    finally:
        _CHAT_MODEL_OFF.reset(token)


def client_from_settings(**overrides: Any) -> ModelClient | None:
    """A client configured from Django settings (``PMEM_LLM_*``, ``PMEM_EMBED_*``), or None
    when ``PMEM_LLM_BASE_URL`` is empty (no model configured) or inside
    :func:`chat_model_off`. ``overrides`` replace constructor arguments (a health probe's
    short timeout, say)."""
    from django.conf import settings

    from .client import ModelClient  # here: client.py re-exports this module's names

    base_url = settings.PMEM_LLM_BASE_URL
    if not base_url or _CHAT_MODEL_OFF.get():
        return None
    options: dict[str, Any] = {
        "base_url": base_url,
        "model": settings.PMEM_LLM_MODEL or "default",
        "api_key": settings.PMEM_LLM_API_KEY or "EMPTY",
        "timeout": settings.PMEM_LLM_TIMEOUT,
        "max_retries": settings.PMEM_LLM_MAX_RETRIES,
        "concurrency": settings.PMEM_LLM_CONCURRENCY,
        "embed_base_url": settings.PMEM_EMBED_BASE_URL or None,
        "embed_model": settings.PMEM_EMBED_MODEL or None,
        "embed_api_key": settings.PMEM_EMBED_API_KEY or None,
        "embed_dim": settings.PMEM_EMBED_DIM,
        "embed_request_dimensions": settings.PMEM_EMBED_REQUEST_DIMENSIONS,
        "structured_output": settings.PMEM_LLM_STRUCTURED_OUTPUT or "auto",
        "max_tokens": settings.PMEM_LLM_MAX_TOKENS or None,
        "slots_root": host_slots_root(),
    }
    options.update(overrides)
    return ModelClient(**options)
