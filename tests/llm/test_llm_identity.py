"""Soft key identity: one one-word call shown only key names, parsed strictly."""

from __future__ import annotations

import pytest

from memory.llm.identity import confirm_same_key, parse_same_different
from tests.llm.conftest import ClientFactory
from tests.support.scripted_llm import Fault, ScriptedLLM

pytestmark: list[pytest.MarkDecorator] = []


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("same", True),
        ("Same.", True),
        ("  SAME!\n", True),
        ('"different"', False),
        ("**Different**", False),
        ("same or different", None),
        ("they are the same", None),
        ("yes", None),
        ("", None),
    ],
)
def test_answer_is_one_word_same_or_different(raw: str, expected: bool | None) -> None:
    assert parse_same_different(raw) is expected


def test_keys_with_the_same_words_are_confirmed_same(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    result = confirm_same_key(make_client(), "best_5k_personal_time", "personal_best_5k_time")

    assert result.same is True and result.failure is None
    assert scripted_llm.counts["identity"] == 1


def test_keys_with_different_words_are_different(make_client: ClientFactory) -> None:
    assert confirm_same_key(make_client(), "home_city", "home_country").same is False


def test_identity_prompt_shows_only_the_two_key_names(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    confirm_same_key(make_client(), "home_city", "city_of_residence")

    body = scripted_llm.requests_for("identity")[0].body
    user = body["messages"][-1]["content"]
    assert "<key_a>home_city</key_a>" in user and "<key_b>city_of_residence</key_b>" in user
    assert "response_format" not in body


@pytest.mark.parametrize("fault", [Fault.INVALID_JSON, Fault.EMPTY, Fault.CUSTOM("Probably.")])
def test_unclear_answer_is_neither_same_nor_different(
    make_client: ClientFactory, scripted_llm: ScriptedLLM, fault: Fault
) -> None:
    scripted_llm.push(fault, job="identity")

    result = confirm_same_key(make_client(), "a_b", "b_a")

    assert result.same is None and result.failure is not None


def test_identity_server_failure_is_neither_same_nor_different(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.push(Fault.HTTP_500, job="identity", times=3)

    result = confirm_same_key(make_client(max_retries=1), "a_b", "b_a")

    assert result.same is None and result.failure is not None
