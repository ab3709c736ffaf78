"""pmem_bench recall: its workloads are what they claim, and its scoring reads them right."""

from __future__ import annotations

from collections import Counter

import pytest

from bench import recall
from bench import recall_workloads as workloads
from memory.domain.ranking import words
from memory.services import namespace_create, observations_ingest


def test_the_entity_workload_moves_200_objects_10_times_among_40_locations_in_order():
    w = workloads.entity()

    assert len(w.facts) == 2000 and len(w.questions) == 200
    assert len(workloads.LOCATIONS) == len(set(workloads.LOCATIONS)) == 40
    assert set(Counter(k for k, _ in w.facts).values()) == {10}
    for q in w.questions:  # the question's answer is the object's last move
        assert [v for k, v in w.facts if k == q.key][-1] == q.value
    assert w.facts[:10] != sorted(w.facts[:10])  # interleaved, not object by object


def test_the_meaning_questions_share_no_word_with_their_facts():
    w = workloads.meaning()

    assert len(w.questions) == 20 and len(w.facts) == 80
    facts = dict(w.facts)
    for q in w.questions:
        assert not set(words(q.query)) & set(words(f"{q.key} {facts[q.key]}"))


@pytest.mark.django_db
def test_the_hybrid_read_finds_each_entity_first_where_scoring_says_so():
    w = workloads.entity(per_kind=3, moves=4)
    ns = namespace_create(name="recall-bench-small")
    observations_ingest(namespace=ns, observations=[
        {"facts": [{"key": k, "value": v}]} for k, v in w.facts])

    hybrid = recall.score(ns, w.questions, recall.RANKINGS["hybrid"])

    assert hybrid["n"] == 30 and hybrid["first_line"] == 100.0 and hybrid["stale"] == 0.0
