"""Model extraction through the scripted server: one call, post-processing, misbehaviour."""

from __future__ import annotations

import json

import pytest

from memory.llm import Fact
from memory.llm.errors import ContentError, TransportError
from memory.llm.extraction import (
    MAX_DROPS_RECORDED,
    MAX_MODEL_KEY_CHARS,
    extract_facts,
    validate_model_facts,
)
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

    assert result.failure is None
    assert result.facts == [
        Fact("home_city", "Berlin"),
        Fact("mug_1_location", "countertop 2"),
        Fact("mug_1_location", "cabinet 3"),
        Fact("mug_1_location", "cabinet 3", "withdrawn"),
    ]
    assert scripted_llm.counts["extraction"] == 1
    assert result.prompt_tokens > 0 and result.raw


def test_the_patch_fields_are_offered_only_when_heads_are_shown(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    """With no head shown the grammar is the facts-only one: a small model allowed `op` and
    `old_value` with nothing to patch runs on in them to its token limit."""
    client = make_client()
    extract_facts(client, "home city = Berlin")
    extract_facts(client, "home city = Paris",
                  memory=[{"key": "home_city", "value": "Berlin", "status": "accepted"}])

    first, second = (r.body["response_format"]["json_schema"]["schema"]
                     for r in scripted_llm.requests_for("extraction"))
    item = "facts", "items", "properties"
    assert set(_at(first, item)) == {"key", "value", "assertion"}
    assert set(_at(second, item)) == {"key", "value", "assertion", "op", "old_value"}


def _at(schema: dict, path: tuple[str, ...]) -> dict:
    node = schema["properties"][path[0]]
    for name in path[1:]:
        node = node[name]
    return node


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

    # The observation states the facts (a key or value the observation never mentions but the
    # prompt does is a copy of the instructions, dropped: see the garbage-defence tests).
    result = extract_facts(make_client(), "My personal best 5k time is 27:12. I am 41, "
                                          "and I think I have a cat.")

    assert result.failure is None
    assert result.facts == [
        Fact("personal_best_5k_time", "27:12"),
        Fact("age", "41"),
        Fact("pet", "cat", "hedged"),
    ]
    assert [d["reason"] for d in result.dropped] == ["empty key", "empty value",
                                                     "not a fact object"]


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
    assert isinstance(result.failure, ContentError)
    assert result.failure.reason == error_prefix.replace(" ", "_")


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

    assert result.facts == [] and isinstance(result.failure, TransportError)
    assert result.failure.reason == "timeout"


def test_blank_text_makes_no_call(make_client: ClientFactory, scripted_llm: ScriptedLLM) -> None:
    assert extract_facts(make_client(), "  \n ").facts == []
    assert scripted_llm.counts["extraction"] == 0


# --- garbage defence: what a weak model answers is validated before anything is written ------

MUG = "Update: mug 1 has been moved from countertop 1 to cabinet 3."


def _drops(items: list[object], observation: str = MUG) -> list[tuple[str, str]]:
    _, dropped = validate_model_facts(items, observation=observation)
    return [(d["key"], d["reason"]) for d in dropped]


def test_facts_with_empty_or_non_key_keys_are_dropped_with_their_reason() -> None:
    items = [{"key": "", "value": "cabinet 3"}, {"key": "  ", "value": "x"},
             {"key": "123", "value": "cabinet 3"}, {"key": "!!!", "value": "x"}]
    assert _drops(items) == [("", "empty key"), ("  ", "empty key"),
                             ("123", "not a key: no letter in it"), ("!!!", "empty key")]


def test_over_long_and_sentence_keys_are_dropped() -> None:
    long_key = "mug_" + "x" * 70
    sentence = "mug 1 has been moved from countertop 1 to cabinet 3 today"
    assert _drops([{"key": long_key, "value": "v"}, {"key": sentence, "value": "v"},
                   {"key": "mug_1\nlocation", "value": "v"}]) == [
        (long_key, f"key longer than {MAX_MODEL_KEY_CHARS} characters"),
        (sentence, "not a key: a sentence"), ("mug_1\nlocation", "not a key: a sentence")]


def test_values_and_keys_copying_the_instructions_are_dropped() -> None:
    items = [
        {"key": "mug_1_location", "value": "You turn one observation into keyed facts for an "
                                           "agent's memory."},
        {"key": "mug_1_location", "value": "copied verbatim from the observation"},
        {"key": "mug_1_location", "value": "asserted"},
        {"key": "key", "value": "value"},
        {"key": "alice_home_city", "value": "cabinet 3"},  # the prompt's example key
    ]
    assert [reason for _, reason in _drops(items)] == [
        "value copies the instructions", "value copies the instructions",
        "value copies the instructions", "key copies the instructions",
        "key copies the instructions"]


def test_words_the_observation_uses_are_never_taken_for_a_copy() -> None:
    # 'mug_1_location' is the prompt's example key too, and 'reported' an assertion name:
    # the observation uses them, so they are the observation's.
    facts, dropped = validate_model_facts(
        [{"key": "mug_1_location", "value": "cabinet 3"},
         {"key": "status", "value": "reported"}],
        observation=MUG + " Its status: reported.")
    assert [(f.key, f.value) for f in facts] == [("mug_1_location", "cabinet 3"),
                                                ("status", "reported")]
    assert dropped == []


def test_repeated_key_value_pairs_within_one_answer_are_dropped_but_not_a_withdrawal() -> None:
    items = [{"key": "mug_1_location", "value": "cabinet 3"},
             {"key": "Mug 1 Location", "value": "Cabinet  3"},
             {"key": "mug_1_location", "value": "countertop 1"},
             {"key": "mug_1_location", "value": "cabinet 3", "assertion": "withdrawn"}]
    facts, dropped = validate_model_facts(items, observation=MUG)
    assert [(f.value, f.assertion) for f in facts] == [
        ("cabinet 3", "asserted"), ("countertop 1", "asserted"), ("cabinet 3", "withdrawn")]
    assert [d["reason"] for d in dropped] == [
        "duplicate: the same key and value earlier in this answer"]


def test_a_degenerate_answer_records_a_bounded_number_of_drops() -> None:
    items = [{"key": "mug_1_location", "value": "cabinet 3"}] * 500
    facts, dropped = validate_model_facts(items, observation=MUG)
    assert len(facts) == 1 and len(dropped) == MAX_DROPS_RECORDED


def test_extraction_reports_what_it_dropped_with_the_raw_answer(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    answer = {"facts": [{"key": "", "value": "You turn one observation into keyed facts.",
                         "assertion": "asserted"},
                        {"key": "mug_1_location", "value": "cabinet 3", "assertion": "asserted"},
                        {"key": "mug_1_location", "value": "cabinet 3", "assertion": "asserted"}]}
    scripted_llm.push(Fault.CUSTOM(json.dumps(answer)), job="extraction")

    result = extract_facts(make_client(), MUG)

    assert result.failure is None and result.facts == [Fact("mug_1_location", "cabinet 3")]
    assert [d["reason"] for d in result.dropped] == [
        "empty key", "duplicate: the same key and value earlier in this answer"]
    assert json.loads(result.raw) == answer
