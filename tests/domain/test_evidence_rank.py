"""The evidence read's fusion (memory.domain.evidence_rank): meaning and words added, a
passage without an embedding ranked by its words, and passages that are parts of one
observation ranked like whole ones."""

from __future__ import annotations

from memory.domain.evidence_rank import EVIDENCE_LEXICAL_WEIGHT, Passage, rank_passages


def test_the_fused_score_adds_the_weighted_word_share_to_the_cosine():
    ranked = rank_passages([Passage(1, 0.6, 0.0), Passage(2, 0.3, 0.5), Passage(3, 0.2, 1.0)], 3)

    assert [r.key for r in ranked] == [3, 2, 1]  # 1.2, 0.8, 0.6 at the default weight
    assert ranked[0].score == 0.2 + EVIDENCE_LEXICAL_WEIGHT * 1.0
    assert (ranked[0].semantic, ranked[0].lexical) == (0.2, 1.0)


def test_a_passage_not_embedded_yet_is_ranked_by_its_words_not_dropped():
    ranked = rank_passages([Passage(1, 0.1, 0.0), Passage(2, None, 1.0)], 2)

    assert ranked[0].key == 2 and ranked[0].semantic is None
    assert ranked[0].score == EVIDENCE_LEXICAL_WEIGHT


def test_parts_of_one_observation_rank_as_passages_of_their_own():
    session = [Passage((7, turn), sem, lex)
               for turn, sem, lex in ((0, 0.2, 0.0), (1, 0.4, 0.8), (2, 0.3, 0.1))]
    ranked = rank_passages([*session, Passage((9, None), 0.35, 0.2)], 2)

    assert [r.key for r in ranked] == [(7, 1), (9, None)]


def test_equal_scores_put_the_later_arrival_first():
    ranked = rank_passages([Passage(1, 0.5, 0.0), Passage(2, 0.5, 0.0)], 2, order={1: 10, 2: 3})

    assert [r.key for r in ranked] == [1, 2]
