"""Model extraction through the scripted server: one call, post-processing, misbehaviour."""

from __future__ import annotations

import json

import pytest

from memory.llm import Fact
from memory.llm.extraction import extract_facts
from tests.llm.conftest import ClientFactory
from tests.support.scripted_llm import Fault, ScriptedLLM

pytestmark: list[pytest.MarkDecorator] = []

OBSERVATION = """home city = Berlin
Earlier observation: mug 1 was in countertop 2.
Update: mug 1 has been moved from countertop 2 to cabinet 3.
The move of mug 1 to cabinet 3 was reported in error."""


def test_extraction_returns_facts_in_observation_order_from_one_call(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    result = extract_facts(make_client(), OBSERVATION)

    assert result.error is None
    assert result.facts == [
        Fact("home_city", "Berlin"),
        Fact("mug_1_location", "countertop 2"),
        Fact("mug_1_location", "cabinet 3"),
        Fact("mug_1_location", "cabinet 3", "withdrawn"),
    ]
    assert scripted_llm.counts["extraction"] == 1
    assert result.prompt_tokens > 0 and result.raw


def test_extraction_normalises_keys_drops_empty_facts_and_repairs_assertions(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    answer = {
        "facts": [
            {"key": "Personal Best 5K Time", "value": " 27:12 ", "assertion": "ASSERTED"},
            {"key": "", "value": "orphan", "assertion": "asserted"},
            {"key": "mood", "value": "   ", "assertion": "asserted"},
            {"key": "age", "value": 41, "assertion": "certainly"},
            {"key": "pet", "value": "cat", "assertion": "hedged"},
            "not an object",
        ]
    }
    scripted_llm.push(Fault.CUSTOM(json.dumps(answer)), job="extraction")

    result = extract_facts(make_client(), "anything")

    assert result.error is None
    assert result.facts == [
        Fact("personal_best_5k_time", "27:12"),
        Fact("age", "41"),
        Fact("pet", "cat", "hedged"),
    ]


def test_extraction_accepts_a_bare_list_in_a_code_fence(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    fenced = '```json\n[{"key": "k", "value": "v", "assertion": "reported"}]\n```'
    scripted_llm.push(Fault.CUSTOM(fenced), job="extraction")

    assert extract_facts(make_client(), "x").facts == [Fact("k", "v", "reported")]


@pytest.mark.parametrize(
    ("fault", "error_prefix"),
    [
        (Fault.INVALID_JSON, "unparsable"),
        (Fault.EMPTY, "unparsable"),
        (Fault.WRONG_SCHEMA, "wrong schema"),
        (Fault.CUSTOM('{"facts": "none"}'), "wrong schema"),
    ],
)
def test_misbehaving_extraction_returns_an_error_and_no_facts(
    make_client: ClientFactory, scripted_llm: ScriptedLLM, fault: Fault, error_prefix: str
) -> None:
    scripted_llm.push(fault, job="extraction")

    result = extract_facts(make_client(), OBSERVATION)

    assert result.facts == []
    assert result.error is not None and result.error.startswith(error_prefix)


def test_extraction_keeps_the_raw_answer_of_a_failed_parse(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.push(Fault.INVALID_JSON, job="extraction")

    assert extract_facts(make_client(), "x").raw.startswith('{"facts"')


def test_extraction_timeout_is_an_error_not_an_exception(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.push(Fault.TIMEOUT(3.0), job="extraction")

    result = extract_facts(make_client(timeout=0.3, max_retries=0), "a = b")

    assert result.facts == [] and result.error == "timeout"


def test_blank_text_makes_no_call(make_client: ClientFactory, scripted_llm: ScriptedLLM) -> None:
    assert extract_facts(make_client(), "  \n ").facts == []
    assert scripted_llm.counts["extraction"] == 0
