"""Soft key identity's deterministic pre-check (SPEC §5.3, docs/identity.md) on the labelled
key pairs of tests/llm/fixtures/identity_pairs.json (LoCoMo and FactConsolidation
vocabularies, and id-style keys; built by bench/identity_pairs.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory.domain.keyrule import identifier_tokens, is_identifier, same_by_rule

pytestmark: list[pytest.MarkDecorator] = []

PAIRS = json.loads((Path(__file__).parent / "fixtures" / "identity_pairs.json").read_text())
ASKED = ("paraphrase", "same_id_paraphrase", "different_attribute")


def test_the_labelled_set_holds_every_kind_in_number():
    kinds = {kind: sum(p["kind"] == kind for p in PAIRS)
             for kind in (*ASKED, "id_variant", "normalised_equal")}
    assert kinds["id_variant"] >= 80 and kinds["paraphrase"] >= 100
    assert kinds["same_id_paraphrase"] >= 20 and kinds["different_attribute"] >= 50


def test_every_id_variant_is_told_apart_without_the_model():
    undecided = [(p["a"], p["b"]) for p in PAIRS
                 if p["kind"] == "id_variant" and same_by_rule(p["a"], p["b"]) is not False]
    assert not undecided


def test_every_paraphrase_and_every_undecidable_pair_is_left_to_the_model():
    decided = [(p["a"], p["b"], same_by_rule(p["a"], p["b"])) for p in PAIRS
               if p["kind"] in ASKED and same_by_rule(p["a"], p["b"]) is not None]
    assert not decided


def test_names_equal_once_normalised_are_the_same_key():
    assert all(same_by_rule(p["a"], p["b"]) is True for p in PAIRS
               if p["kind"] == "normalised_equal")


@pytest.mark.parametrize(("a", "b", "expected"), [
    ("mug_1_location", "mug_2_location", False),
    ("order_8812_status", "order_9100_status", False),
    ("k8e31e885bee9", "k2aa7f7ad80c7", False),
    ("device_deadbeefcafe_firmware", "device_feedfacebead_firmware", False),
    ("order_8812_status", "order_status", None),  # the id-less name may mean that order
    ("personal_best_5k_time", "best_5k_personal_time", None),
    ("address_line", "address", None),
    ("Mug 1 location", "mug_1_location", True),
])
def test_the_rule_on_named_cases(a, b, expected):
    assert same_by_rule(a, b) is expected


def test_identifier_tokens_are_numbers_words_with_digits_and_long_hex_runs():
    assert [t for t in ("12", "5k", "k3f2a9c01b7e", "deadbeef", "cafe", "decade", "status")
            if is_identifier(t)] == ["12", "5k", "k3f2a9c01b7e", "deadbeef"]
    assert identifier_tokens("Order 8812 / line 2") == {"8812": 1, "2": 1}


def test_each_embedder_gates_at_the_threshold_its_calibration_chooses():
    from bench.identity_gate import choose, cosines
    from memory.llm.embedding import HashingEmbedder, MiniLMEmbedder

    same = [p for p in PAIRS if p["kind"] in ("paraphrase", "same_id_paraphrase")]
    wasted = [p for p in PAIRS if p["kind"] == "different_attribute"]
    for embedder in (HashingEmbedder(), MiniLMEmbedder()):
        chosen, _ = choose(cosines(embedder, same), cosines(embedder, wasted))
        assert embedder.identity_threshold == chosen, embedder.name


def test_unset_the_gate_is_the_embedders_and_set_it_is_the_setting(settings):
    from memory.llm.embedding import identity_threshold, reset_embedder_cache

    settings.PMEM_IDENTITY_THRESHOLD = None
    settings.PMEM_EMBEDDER = "hashing"
    reset_embedder_cache()
    assert identity_threshold() == 0.69
    settings.PMEM_IDENTITY_THRESHOLD = 0.8
    assert identity_threshold() == 0.8
