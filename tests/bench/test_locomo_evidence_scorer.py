"""The LoCoMo evidence scorer (bench/locomo_evidence.py): any@k by turn and by session over
the dataset's evidence ids, entries that hold several ids split."""

from __future__ import annotations

from bench.locomo_evidence import _evidence_ids, _score


def test_an_entry_naming_several_turns_is_split():
    assert _evidence_ids({"evidence": ["D8:6; D9:17", "D1:3"]}) == {"D8:6", "D9:17", "D1:3"}
    assert _evidence_ids({"evidence": []}) == set()


def test_a_turn_counts_at_its_place_and_its_session_at_any_turn_of_it():
    ranked = ["D2:1", "D3:4", "D1:9", "D4:1", "D5:2", "D1:3"]

    hit = _score(ranked, {"D1:3"})

    assert hit["turn_any@1"] is False and hit["turn_any@5"] is False
    assert hit["turn_any@10"] is True
    assert hit["session_any@5"] is True  # D1:9 is of the same session, third


def test_nothing_found_scores_nothing():
    assert not any(_score(["D2:1"], {"D1:1"}).values())
