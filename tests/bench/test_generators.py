"""The scenario generators: deterministic (seed 42), well-formed, and faithful to the paper's
construction. Pure Python: no database."""

from __future__ import annotations

import re

import pytest

from bench.scenarios import alfworld, contest, factconsolidation, retraction
from bench.scenarios.common import location_key, mentions

UPDATE = re.compile(r"^Update: (.+) has been moved from (.+) to (.+)\.$")
STALE = re.compile(r"^Earlier observation: (.+) was in (.+)\.$")


def _chains(case):
    """Each object's locations in arrival order, rebuilt from the text alone."""
    chains: dict[str, list[str]] = {}
    for event in case.events:
        if m := STALE.match(event.text):
            chains.setdefault(m.group(1), []).append(m.group(2))
        elif m := UPDATE.match(event.text):
            assert chains[m.group(1)][-1] == m.group(2), "a move starts where the last one ended"
            chains[m.group(1)].append(m.group(3))
    return chains


def test_generators_are_deterministic():
    assert alfworld.generate(5) == alfworld.generate(5)
    assert retraction.generate(3) == retraction.generate(3)
    assert contest.generate(4) == contest.generate(4)
    assert factconsolidation.make_stream(455) == factconsolidation.make_stream(455)


def test_adding_cases_keeps_earlier_cases():
    assert alfworld.generate(3, (2,)) == alfworld.generate(6, (2,))[:3]


@pytest.mark.parametrize("length", alfworld.LENGTHS)
def test_alfworld_chains_have_length_L_over_distinct_locations(length):
    for case in alfworld.generate(20, (length,)):
        chains = _chains(case)
        assert len(chains) == 5 and case.target in chains
        for locations in chains.values():
            assert len(locations) == length + 1
            assert len(set(locations)) == length + 1
        assert case.probes[-1].gold == chains[case.target][-1]
        assert len(case.events) == 5 * (length + 1)
        assert [e.seq for e in case.events] == list(range(1, len(case.events) + 1))


def test_alfworld_merge_preserves_each_chain_order_and_interleaves():
    interleaved = 0
    for case in alfworld.generate(30, (4,)):
        for obj in {e.obj for e in case.events}:
            mine = [e for e in case.events if e.obj == obj]
            assert STALE.match(mine[0].text), "the stale record opens each chain"
            assert all(UPDATE.match(e.text) for e in mine[1:])
        runs = [e.obj for i, e in enumerate(case.events)
                if i == 0 or case.events[i - 1].obj != e.obj]
        interleaved += len(runs) > len(set(runs))  # some object's events are not contiguous
    assert interleaved > 0, "chains are interleaved, not concatenated"


def test_alfworld_names_follow_textworld():
    case = alfworld.make_case(0, 8)
    assert re.fullmatch(r"[a-z]+ \d", case.target)
    assert case.key == location_key(case.target) == case.target.replace(" ", "_") + "_location"
    assert case.question == f"where is the {case.target} now?"


@pytest.mark.parametrize("distance", retraction.DISTANCES)
def test_retraction_names_v2_only_and_v1_appears_nowhere_else(distance):
    for case in retraction.generate(20, (distance,)):
        v1, v2 = case.marks["v1"], case.marks["v2"]
        last = case.events[-1].text
        assert last == f"The move of {case.target} to {v2} was reported in error."
        assert not mentions(last, v1)
        with_v1 = [e for e in case.events if mentions(e.text, v1)]
        assert [e.obj for e in with_v1] == [case.target, case.target]  # statement + the error
        error_at = next(i for i, e in enumerate(case.events) if UPDATE.match(e.text)
                        and e.obj == case.target)
        between = case.events[error_at + 1:-1]
        assert len(between) == distance and all(e.obj != case.target for e in between)
        assert [p.gold for p in case.probes] == [v2, v1]


def test_contest_is_counterbalanced_and_uncued():
    cases = contest.generate(40)
    firsts = sum(c.probes[-1].gold == c.marks["a"] for c in cases)
    assert firsts == 20
    for case in cases:
        reports = [e.text for e in case.events if e.text.startswith("Report:")]
        assert reports == [f"Report: {case.target} is in {case.marks['a']}.",
                           f"Report: {case.target} is in {case.marks['b']}."]
        start = next(i for i, e in enumerate(case.events) if e.text == reports[1])
        assert len(case.events[start + 1:-1]) == contest.DISTRACTOR_EVENTS
        assert case.events[-1].text.startswith(f"Check: {case.target} is confirmed in ")


@pytest.mark.parametrize("size", factconsolidation.SIZES)
def test_factconsolidation_sizes_and_overwrite_rate(size):
    stream = factconsolidation.make_stream(size, questions=10)
    lines = stream.text.split("\n")
    assert lines[0] == "Here is a list of facts:"
    assert len(lines) == size + 1
    assert all(line.startswith(f"{i}. ") for i, line in enumerate(lines[1:]))
    history = factconsolidation.parse_stream(stream.text)
    assert history == stream.history
    rate = sum(len(v) > 1 for v in history.values()) / len(history)
    assert 0.55 <= rate <= 0.63
    assert all(a != b for values in history.values() for a, b in zip(values, values[1:], strict=False))


def test_factconsolidation_templates_parse_with_the_rule_extractor():
    from memory.llm.rules import RuleExtractor

    stream = factconsolidation.make_stream(455, questions=5)
    facts = RuleExtractor(factconsolidation.rule_patterns()).extract(stream.text)
    assert [(f.key, f.value) for f in facts] == [(f.key, f.value) for f in stream.facts]


def test_factconsolidation_gold_is_the_final_value():
    stream = factconsolidation.make_stream(2310)
    final = stream.final
    singles = [q for q in stream.questions if q.kind == "single"]
    multis = [q for q in stream.questions if q.kind == "multi"]
    assert len(singles) == len(multis) == 100
    for q in singles:
        assert q.gold == final[q.hops[0]]
        assert q.stale == stream.history[q.hops[0]][:-1]


def test_factconsolidation_multi_hop_gold_chains_current_values():
    stream = factconsolidation.make_stream(455)
    final = stream.final
    for q in (q for q in stream.questions if q.kind == "multi"):
        assert 2 <= len(q.hops) <= 4
        subject_keys = set(final)
        for here, there in zip(q.hops, q.hops[1:], strict=False):
            value = final[here]
            assert there in subject_keys
            assert factconsolidation.subject_of_key(there) == factconsolidation.fact_key(value, "")
        assert q.gold == final[q.hops[-1]]


def test_multi_hop_question_reads_like_the_benchmark():
    relation = factconsolidation.BY_NAME
    phrase = relation["spouse"].phrase.format(s=relation["author"].phrase.format(s="Our Friend"))
    text = relation["citizenship"].question.format(s=phrase)
    assert text == "What is the country of citizenship of the spouse of the author of Our Friend?"


@pytest.mark.parametrize(("prediction", "gold", "hit"), [
    ("The answer is Belgium.", "Belgium", True),
    ("belgium", "Belgium", True),
    ("University of California, Berkeley", "University of California Berkeley", True),
    ("An Apple a day", "the apple", True),
    ("Netherlands", "Belgium", False),
    ("", "Belgium", False),
])
def test_substring_exact_match(prediction, gold, hit):
    assert factconsolidation.substring_exact_match(prediction, gold) is hit


def test_normalize_answer_strips_case_punctuation_and_articles():
    assert factconsolidation.normalize_answer("  The  Quick, brown fox!  ") == "quick brown fox"


def test_stale_prediction_names_an_earlier_value():
    q = factconsolidation.Question("single", "q?", "Rome", ("k",), ("Paris",))
    assert factconsolidation.is_stale("Paris", q)
    assert not factconsolidation.is_stale("Rome", q)
    assert not factconsolidation.is_stale("Berlin", q)


def test_location_match_is_whole_words():
    assert mentions("It is in cabinet 1.", "cabinet 1")
    assert not mentions("cabinet 10", "cabinet 1")
    assert not mentions(None, "cabinet 1")
