"""``manage.py pmem_model check``: what the configured endpoints can do, and the cause in words
when they cannot (refused connection, unknown model name, 401, timeout, unsupported format)."""

from __future__ import annotations

import socket
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from memory.llm.check import forget_status
from memory.llm.client import endpoint_forms
from memory.llm.embedding import reset_embedder_cache
from tests.support.scripted_llm import Fault, ScriptedLLM


@pytest.fixture(autouse=True)
def _fresh() -> None:
    endpoint_forms.clear()
    forget_status()
    reset_embedder_cache()


def point_at(settings: Any, server: ScriptedLLM | None, *, url: str | None = None,
             embeddings: bool = True, key: str = "EMPTY", model: str | None = None) -> None:
    base = url or (server.base_url if server else "")
    settings.PMEM_LLM_BASE_URL = base
    settings.PMEM_LLM_MODEL = model or (server.model if server else "m")
    settings.PMEM_LLM_API_KEY = key
    settings.PMEM_EMBED_API_KEY = key
    settings.PMEM_EMBED_BASE_URL = base if embeddings else ""
    settings.PMEM_EMBED_MODEL = settings.PMEM_LLM_MODEL


def check(*args: str) -> str:
    out = StringIO()
    call_command("pmem_model", "check", *args, stdout=out)
    return out.getvalue()


def refused_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


def test_check_prints_each_form_the_extraction_latency_and_the_embedding_size(settings):
    with ScriptedLLM(formats={"json_object"}) as server:
        point_at(settings, server)
        out = check()
    assert "json_schema         no: unsupported format: http 500" in out
    assert "json_object         ok" in out and "structured output: json_object" in out
    assert "one-sentence extraction:" in out and "mug_1_location = cabinet 3" in out
    assert "384 dimensions" in out


def test_check_without_a_model_names_the_rule_extractor_and_succeeds(settings):
    point_at(settings, None)
    out = check()
    assert "none configured" in out and "local embedder" in out


def test_refused_connection_exits_non_zero_naming_the_cause(settings):
    point_at(settings, None, url=refused_url(), embeddings=False)
    with pytest.raises(CommandError, match="refused connection"):
        check("--timeout", "2")


def test_unknown_model_name_exits_non_zero_naming_it(settings):
    with ScriptedLLM(strict_model=True) as server:
        point_at(settings, server, model="no-such-model", embeddings=False)
        with pytest.raises(CommandError, match="unknown model name 'no-such-model'"):
            check()


def test_a_wrong_api_key_exits_non_zero_with_401(settings):
    with ScriptedLLM(api_key="right") as server:
        point_at(settings, server, key="wrong", embeddings=False)
        with pytest.raises(CommandError, match="401 unauthorized"):
            check()


def test_a_timeout_exits_non_zero_naming_it(settings):
    with ScriptedLLM() as server:
        point_at(settings, server, embeddings=False)
        server.delay("chat", 3.0)
        with pytest.raises(CommandError, match="timeout"):
            check("--timeout", "0.5")


def test_an_embeddings_endpoint_that_fails_is_named(settings):
    with ScriptedLLM() as server:
        point_at(settings, server)
        server.push(Fault.HTTP(401), job="embeddings")
        with pytest.raises(CommandError, match="embeddings endpoint .*401 unauthorized"):
            check()


def test_summary_never_fails_and_says_what_was_found(settings):
    point_at(settings, None, url=refused_url())
    out = check("--summary", "--timeout", "2")
    assert "is not answering (refused connection" in out
    assert "did not answer (refused connection" in out
    forget_status()
    with ScriptedLLM(formats={"guided_json"}) as server:
        point_at(settings, server)
        out = check("--summary")
    assert "structured output: guided_json" in out and "answered (384 dimensions)" in out


def test_a_pinned_form_the_server_refuses_exits_non_zero_with_unsupported_format(settings):
    with ScriptedLLM(formats={"json_object"}) as server:
        point_at(settings, server, embeddings=False)
        settings.PMEM_LLM_STRUCTURED_OUTPUT = "json_schema"
        with pytest.raises(CommandError, match="unsupported format: http 500"):
            check()


def test_a_timeout_after_a_refused_form_is_named_as_the_cause(settings):
    with ScriptedLLM(formats={"json_object"}) as server:
        point_at(settings, server, embeddings=False)
        server.delay("chat", 3.0)  # the refusal of json_schema comes at once, then silence
        out = check("--summary", "--timeout", "0.5")
    assert "is not answering (timeout" in out
