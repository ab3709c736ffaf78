"""The rule extractor: ALFWorld templates, key/value lines, configurable patterns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory.llm import Fact
from memory.llm.rules import (
    DEFAULT_PATTERNS,
    Pattern,
    RuleExtractor,
    compile_template,
    patterns_from_json,
    split_sentences,
)

pytestmark: list[pytest.MarkDecorator] = []

extract = RuleExtractor().extract


@pytest.mark.parametrize(
    ("sentence", "fact"),
    [
        ("Earlier observation: mug 1 was in countertop 2.", Fact("mug_1_location", "countertop 2")),
        (
            "Update: mug 1 has been moved from countertop 2 to cabinet 3.",
            Fact("mug_1_location", "cabinet 3"),
        ),
        (
            "Correction: the move of mug 1 to cabinet 3 was reported in error.",
            Fact("mug_1_location", "cabinet 3", "withdrawn"),
        ),
        (
            "The move of mug 1 to cabinet 3 was reported in error.",
            Fact("mug_1_location", "cabinet 3", "withdrawn"),
        ),
        ("Report: mug 1 is in sink 1.", Fact("mug_1_location", "sink 1", "reported", "contest")),
        (
            "Check: mug 1 is confirmed in sink 1.",
            Fact("mug_1_location", "sink 1", "asserted", "resolve"),
        ),
        (
            "update:  Alarm Clock 2 has been moved from desk 1 to shelf 3",
            Fact("alarm_clock_2_location", "shelf 3"),
        ),
    ],
)
def test_alfworld_templates_yield_one_location_fact(sentence: str, fact: Fact) -> None:
    assert extract(sentence) == [fact]


def test_several_templated_sentences_on_one_line_yield_facts_in_order() -> None:
    line = (
        "Update: mug 1 has been moved from desk 1 to shelf 3. "
        "Update: pen 2 has been moved from shelf 3 to drawer 4. "
        "Update: mug 1 has been moved from shelf 3 to sink 1."
    )

    assert extract(line) == [
        Fact("mug_1_location", "shelf 3"),
        Fact("pen_2_location", "drawer 4"),
        Fact("mug_1_location", "sink 1"),
    ]


def test_key_value_lines_keep_values_verbatim_and_normalise_keys() -> None:
    text = "Home City = Berlin\n- favourite colour: dark blue  \n\nbest 5k time: 27:12\n  x =  \n"

    assert extract(text) == [
        Fact("home_city", "Berlin"),
        Fact("favourite_colour", "dark blue"),
        Fact("best_5k_time", "27:12"),
    ]


@pytest.mark.parametrize(
    "line",
    [
        "Well, I think: maybe",
        "this is a rather long sentence with far too many words: value",
        "Is it true? yes: no",
        "see http://example.com",
        "10: 30",
        "Nothing to extract here.",
        "12. Thomas Kyd was born in the city of London.",
    ],
)
def test_prose_is_not_mistaken_for_a_key_value_line(line: str) -> None:
    assert extract(line) == []


def test_numbered_benchmark_lines_use_supplied_patterns() -> None:
    born = Pattern("{n}. {subject} was born in the city of {city}.", "{subject}_birth_city", "city")
    text = (
        "0. Thomas Kyd was born in the city of London.\n"
        "1. The chairperson of Fatah is Mahmoud Abbas.\n"
        "306. Thomas Kyd was born in the city of Leeds."
    )

    assert RuleExtractor([born]).extract(text) == [
        Fact("thomas_kyd_birth_city", "London"),
        Fact("thomas_kyd_birth_city", "Leeds"),
    ]


def test_regex_patterns_with_named_groups_are_accepted() -> None:
    chair = Pattern(
        r"^\d+\.\s+The chairperson of (?P<org>.+?) is (?P<who>.+?)\.?$", "{org}_chairperson", "who"
    )

    assert RuleExtractor([chair]).extract("1. The chairperson of Fatah is Mahmoud Abbas.") == [
        Fact("fatah_chairperson", "Mahmoud Abbas")
    ]


def test_a_sentence_matches_at_most_the_first_pattern() -> None:
    first = Pattern("{a} is in {b}.", "{a}_place", "b")
    second = Pattern("{a} is in {b}.", "{a}_other", "b", assertion="reported")

    assert RuleExtractor([first, second]).extract("pen is in box.") == [Fact("pen_place", "box")]


def test_template_compiles_case_insensitive_with_optional_period() -> None:
    regex = compile_template("Earlier observation: {obj} was in {loc}.")

    found = regex.match("earlier   OBSERVATION: mug 1 was in fridge 1")
    assert found is not None and found.group("loc") == "fridge 1"
    assert regex.match("Earlier observation: mug 1 was in fridge 1. Extra.") is None


@pytest.mark.parametrize(
    "kwargs",
    [
        {"pattern": "{a} to {a}", "key_template": "{a}", "value_group": "a"},
        {"pattern": "{a} is {b}", "key_template": "{a}", "value_group": "c"},
        {"pattern": "{a} is {b}", "key_template": "{zzz}", "value_group": "b"},
        {"pattern": "{a} is {b}", "key_template": "{a}", "value_group": "b", "assertion": "sure"},
        {"pattern": "{a} is {b}", "key_template": "{a}", "value_group": "b", "op": "merge"},
    ],
)
def test_malformed_patterns_are_refused(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        Pattern(**kwargs)


def test_patterns_load_from_a_json_file(tmp_path: Path) -> None:
    path = tmp_path / "patterns.json"
    path.write_text(
        json.dumps(
            [
                {"pattern": "{who} lives in {city}.", "key": "{who}_home_city", "value": "city"},
                {
                    "pattern": "{who} left {city}.",
                    "key": "{who}_home_city",
                    "value": "city",
                    "assertion": "withdrawn",
                },
            ]
        )
    )

    extractor = RuleExtractor(patterns_from_json(path))

    assert extractor.extract("Ann lives in Oslo. Ann left Oslo.") == [
        Fact("ann_home_city", "Oslo"),
        Fact("ann_home_city", "Oslo", "withdrawn"),
    ]


def test_patterns_load_from_a_list_and_bad_entries_are_reported() -> None:
    assert len(patterns_from_json([{"pattern": "{a} = {b}", "key": "{a}", "value": "b"}])) == 1
    with pytest.raises(ValueError, match="#0"):
        patterns_from_json([{"pattern": "{a}"}])


def test_default_patterns_cover_the_alfworld_vocabulary() -> None:
    assert {p.assertion for p in DEFAULT_PATTERNS} == {"asserted", "withdrawn", "reported"}


def test_sentence_split_keeps_list_numbers_with_their_sentence() -> None:
    assert split_sentences("12. Kyd was born in London. He wrote plays.") == [
        "12. Kyd was born in London.",
        "He wrote plays.",
    ]
