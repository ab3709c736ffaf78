"""ModelClient over real HTTP against the scripted server: parsing, retries, caps, embeddings."""

from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest

from memory.llm import prompts
from memory.llm.client import ModelClient, client_from_settings, fit_vector, parse_json_loose
from memory.llm.errors import ContentError, TransportError
from tests.llm.conftest import ClientFactory
from tests.support.scripted_llm import Fault, ScriptedLLM

pytestmark: list[pytest.MarkDecorator] = []


def extraction_call(client: ModelClient, text: str = "colour = blue"):
    return client.chat_json(
        messages=prompts.extraction_messages(text),
        schema=prompts.EXTRACTION_SCHEMA,
        schema_name=prompts.EXTRACTION,
    )


def test_chat_json_returns_parsed_data_usage_and_one_attempt(make_client: ClientFactory) -> None:
    result = extraction_call(make_client())

    assert result.ok
    assert result.data == {"facts": [{"key": "colour", "value": "blue", "assertion": "asserted"}]}
    assert result.prompt_tokens > 0 and result.completion_tokens > 0
    assert result.attempts == 1


def test_chat_json_sends_a_strict_json_schema_response_format(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    extraction_call(make_client())

    body = scripted_llm.requests_for("extraction")[0].body
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["name"] == prompts.EXTRACTION
    assert body["response_format"]["json_schema"]["strict"] is True
    assert body["temperature"] == 0.0


def test_rate_limited_call_is_retried_and_then_succeeds(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.push(Fault.HTTP_429, job="extraction")

    result = extraction_call(make_client())

    assert result.ok and result.attempts == 2
    assert scripted_llm.counts["extraction"] == 2


def test_retry_after_header_sets_the_wait(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.push(Fault.HTTP(429, retry_after=0.4), job="extraction")

    started = time.monotonic()
    result = extraction_call(make_client())

    assert result.ok
    assert time.monotonic() - started >= 0.4


def test_server_errors_exhaust_retries_and_return_an_error(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.push(Fault.HTTP_500, job="extraction", times=5)
    client = make_client(max_retries=2)

    result = extraction_call(client)

    assert result.data is None
    assert isinstance(result.failure, TransportError) and result.failure.status == 500
    assert result.attempts == 3
    assert scripted_llm.counts["extraction"] == 3
    assert client.counter.chat_calls == 1


def test_client_error_is_not_retried(make_client: ClientFactory, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.push(Fault.HTTP(400), job="extraction")

    result = extraction_call(make_client())

    assert isinstance(result.failure, TransportError) and result.failure.status == 400
    assert result.attempts == 1


def test_timeout_returns_an_error_instead_of_raising(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.push(Fault.TIMEOUT(3.0), job="extraction")

    result = extraction_call(make_client(timeout=0.3, max_retries=0))

    assert result.data is None and isinstance(result.failure, TransportError)
    assert result.failure.reason == "timeout" and str(result.failure) == "timeout"


def test_timeout_then_success_is_retried(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.push(Fault.TIMEOUT(3.0), job="extraction")

    result = extraction_call(make_client(timeout=0.3, max_retries=1))

    assert result.ok and result.attempts == 2


def test_unreachable_server_returns_a_connection_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = ModelClient(
        base_url=f"http://127.0.0.1:{port}/v1", model="m", max_retries=1, backoff_base=0.01
    )

    result = extraction_call(client)

    assert isinstance(result.failure, TransportError) and result.failure.reason == "connection"
    assert result.attempts == 2


def test_unparsable_answer_keeps_the_raw_text(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.push(Fault.CUSTOM("I cannot do that."), job="extraction")

    result = extraction_call(make_client())

    assert result.data is None
    assert isinstance(result.failure, ContentError) and result.failure.reason == "unparsable"
    assert result.raw == "I cannot do that."


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ("<think>hmm {no}</think>\n[1, 2]", [1, 2]),
        ('Sure! Here it is: {"a": [1]} -- done', {"a": [1]}),
        ('prefix [1, 2] and {"b": 2}', [1, 2]),
    ],
)
def test_loose_json_parsing_strips_fences_and_finds_the_first_block(raw: str, expected) -> None:
    assert parse_json_loose(raw) == expected


@pytest.mark.parametrize("raw", ["", "   ", "no json here", "{broken"])
def test_loose_json_parsing_rejects_text_without_json(raw: str) -> None:
    with pytest.raises(ValueError):
        parse_json_loose(raw)


def test_chat_text_returns_the_stripped_answer(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.push(Fault.CUSTOM("  Same.\n"), job="identity")

    result = make_client().chat_text(messages=prompts.identity_messages("a", "b"), max_tokens=4)

    assert result.data == "Same."
    assert scripted_llm.requests_for("identity")[0].body["max_tokens"] == 4


def test_concurrency_cap_is_shared_by_clients_of_one_endpoint(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.delay("extraction", 0.2)
    clients = [make_client(concurrency=2), make_client(concurrency=2)]
    threads = [threading.Thread(target=extraction_call, args=(clients[i % 2],)) for i in range(8)]

    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert scripted_llm.counts["extraction"] == 8
    assert scripted_llm.max_in_flight == 2


def test_call_counter_totals_calls_and_tokens(make_client: ClientFactory) -> None:
    client = make_client()
    first, second = extraction_call(client), extraction_call(client, "a = b")
    client.embed(["a longer text to embed", "and another one"])

    totals = client.counter.snapshot()
    assert totals["chat_calls"] == 2 and totals["embed_calls"] == 1
    assert totals["completion_tokens"] == first.completion_tokens + second.completion_tokens
    assert totals["prompt_tokens"] > first.prompt_tokens + second.prompt_tokens


def test_embed_sends_one_request_per_batch_and_returns_unit_vectors(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    result = make_client().embed(["mug 1 location", "home city", "favourite colour"])

    assert result.ok and len(result.vectors) == 3
    assert all(len(v) == 384 for v in result.vectors)
    assert all(abs(np.linalg.norm(v) - 1.0) < 1e-9 for v in result.vectors)
    assert scripted_llm.counts["embeddings"] == 1
    assert "dimensions" not in scripted_llm.requests_for("embeddings")[0].body


def test_embed_requests_dimensions_only_when_asked(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    make_client(embed_dim=128, embed_request_dimensions=True).embed(["x"])

    assert scripted_llm.requests_for("embeddings")[0].body["dimensions"] == 128


def test_embed_pads_or_truncates_to_the_configured_dimension(make_client: ClientFactory) -> None:
    padded = make_client(embed_dim=500).embed(["some text"]).vectors[0]
    truncated = make_client(embed_dim=100).embed(["some text"]).vectors[0]

    assert len(padded) == 500 and padded[384:] == [0.0] * 116
    assert len(truncated) == 100 and abs(np.linalg.norm(truncated) - 1.0) < 1e-9


def test_embed_failure_returns_an_error(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.push(Fault.HTTP_500, job="embeddings")

    result = make_client(max_retries=0).embed(["x"])

    assert result.vectors == [] and isinstance(result.failure, TransportError)


def test_embed_of_nothing_makes_no_request(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    assert make_client().embed([]).vectors == []
    assert scripted_llm.counts["embeddings"] == 0


def test_fit_vector_leaves_a_zero_vector_zero() -> None:
    assert fit_vector([0.0, 0.0], 3) == [0.0, 0.0, 0.0]


def test_client_from_settings_is_none_without_a_base_url(settings) -> None:
    settings.PMEM_LLM_BASE_URL = ""

    assert client_from_settings() is None


def test_client_from_settings_reads_the_endpoints(settings) -> None:
    settings.PMEM_LLM_BASE_URL = "http://127.0.0.1:9/v1"
    settings.PMEM_LLM_MODEL = "qwen"
    settings.PMEM_LLM_API_KEY = "k"
    settings.PMEM_LLM_TIMEOUT = 7.0
    settings.PMEM_LLM_MAX_RETRIES = 1
    settings.PMEM_LLM_CONCURRENCY = 2
    settings.PMEM_EMBED_BASE_URL = "http://127.0.0.1:10/v1"
    settings.PMEM_EMBED_MODEL = "emb"
    settings.PMEM_EMBED_API_KEY = ""

    client = client_from_settings()

    assert client is not None
    assert (client.model, client.max_retries) == ("qwen", 1)
    assert (client.embed_base_url, client.embed_model) == ("http://127.0.0.1:10/v1", "emb")


@pytest.mark.parametrize(("raw", "expected"), [
    ('{"facts": [{"key": "a", "value": "1"}, {"key": "b", "value": "2"}, {"key": "c", "va',
     {"facts": [{"key": "a", "value": "1"}, {"key": "b", "value": "2"}]}),
    ('[{"op": "accept"},\n {"op": "noop"}, {"op"', [{"op": "accept"}, {"op": "noop"}]),
])
def test_an_answer_cut_off_inside_its_list_keeps_the_complete_objects(raw: str,
                                                                     expected) -> None:
    assert parse_json_loose(raw) == expected


@pytest.mark.parametrize("raw", ['{"facts": [{"key": "a", "va', 'text [ {"x', '{"a": 1, "b": ['])
def test_nothing_complete_before_the_cut_is_still_unparsable(raw: str) -> None:
    with pytest.raises(ValueError):
        parse_json_loose(raw)


def test_chat_json_bounds_the_answer_with_max_tokens(make_client: ClientFactory,
                                                     scripted_llm: ScriptedLLM) -> None:
    extraction_call(make_client(max_tokens=321))
    assert scripted_llm.requests_for("extraction")[0].body["max_tokens"] == 321
