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


def test_the_session_arm_ranks_the_named_turns_by_their_own_scores():
    from bench.locomo_evidence import _turns_of_sessions

    items = [{"id": 7, "messages": [{"index": 2, "score": 0.9}, {"index": 5, "score": 1.4}]},
             {"id": 3, "messages": [{"index": 1, "score": 1.1}]},
             {"id": 9}]  # an observation without messages names no turn
    by_message = {(7, 2): "D2:2", (7, 5): "D2:5", (3, 1): "D1:1"}

    assert _turns_of_sessions(items, by_message) == ["D2:5", "D1:1", "D2:2"]


def test_a_locomo_session_becomes_one_chat_session_with_its_date():
    from bench.locomo_evidence import _sessions

    conversation = {"session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": [
        {"speaker": "Caroline", "dia_id": "D1:1", "text": "Hey Mel!"},
        {"speaker": "Melanie", "dia_id": "D1:2", "text": "Hi Caroline!"}]}

    [(dias, messages)] = _sessions(conversation)

    assert dias == ["D1:1", "D1:2"]
    assert messages[1] == {"role": "assistant", "name": "Melanie", "content": "Hi Caroline!",
                           "at": "2023-05-08T13:56:00Z"}
