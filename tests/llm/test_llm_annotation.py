"""Annotation: one batched call per observation, deterministic validation, rule fallback."""

from __future__ import annotations

import json

import pytest

from memory.llm.annotation import (
    AnnotatedOp,
    AnnotationItem,
    annotate,
    annotate_without_model,
    item_payload,
)
from memory.llm.errors import TransportError
from tests.llm.conftest import ClientFactory
from tests.support.scripted_llm import Fault, ScriptedLLM

pytestmark: list[pytest.MarkDecorator] = []

ITEMS = [
    AnnotationItem("home_city", "Berlin", head_value="Paris", head_status="active"),
    AnnotationItem("mug_1_location", "cabinet 3", "withdrawn", "cabinet 3", "active"),
    AnnotationItem("pet", "cat", "hedged", head_value="dog", head_status="active"),
    AnnotationItem("new_key", "v"),
    AnnotationItem("age", "41", "reported", head_value="40", head_status="active"),
]


def ops_of(result) -> list[tuple[str, str, str | None]]:
    return [(op.key, op.op, op.value) for op in result.ops]


def test_all_facts_of_an_observation_are_annotated_in_one_call(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    result = annotate(make_client(), ITEMS)

    assert scripted_llm.counts["annotation"] == 1
    assert result.failure is None
    assert ops_of(result) == [
        ("home_city", "accept", "Berlin"),
        ("mug_1_location", "revoke", "cabinet 3"),
        ("pet", "contest", "cat"),
        ("new_key", "accept", "v"),
        ("age", "accept", "41"),
    ]
    assert all(op.valid for op in result.ops)


def test_the_model_sees_each_item_with_its_head_and_hints(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    item = AnnotationItem("k", "v", "reported", "w", "contested", ["x"], True, op_hint="contest")

    annotate(make_client(), [item])

    user = scripted_llm.requests_for("annotation")[0].body["messages"][-1]["content"]
    sent = json.loads(user.split("<facts>")[1].split("</facts>")[0])["facts"]
    assert sent == [item_payload(item)]
    assert sent[0]["suggested_op"] == "contest" and sent[0]["alternatives"] == ["x"]


def test_one_key_moved_twice_in_one_observation_pairs_ops_in_order(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    answer = {
        "operations": [
            {
                "op": "accept",
                "key": "mug_1_location",
                "old_value": None,
                "new_value": "a",
                "status": "active",
                "supersedes": False,
            },
            {
                "op": "reject",
                "key": "Mug 1 Location",
                "old_value": "a",
                "new_value": "b",
                "status": "active",
                "supersedes": True,
            },
        ]
    }
    scripted_llm.push(Fault.CUSTOM(json.dumps(answer)), job="annotation")
    # The key has a head: a key without one is a create, never asked about (SPEC §5.4).
    items = [AnnotationItem("mug_1_location", "a", head_value="z", head_status="active"),
             AnnotationItem("mug_1_location", "b", head_value="z", head_status="active")]

    result = annotate(make_client(), items)

    assert ops_of(result) == [("mug_1_location", "accept", "a"), ("mug_1_location", "reject", "b")]


def test_unknown_op_becomes_an_invalid_noop(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.push(Fault.UNKNOWN_OP, job="annotation")

    result = annotate(make_client(), ITEMS[:2])

    assert [op.op for op in result.ops] == ["noop", "noop"]
    assert not any(op.valid for op in result.ops)
    assert all("unknown op 'merge'" in op.reason for op in result.ops)


def test_an_op_for_a_key_never_asked_is_dropped(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.push(Fault.FOREIGN_KEY, job="annotation")

    result = annotate(make_client(), ITEMS[:2])

    assert ops_of(result) == [
        ("home_city", "accept", "Berlin"),
        ("mug_1_location", "revoke", "cabinet 3"),
    ]
    assert all(op.key != "never_asked_key" for op in result.ops)


def test_an_item_the_model_left_out_becomes_a_noop(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    answer = {
        "operations": [
            {
                "op": "accept",
                "key": "pet",
                "old_value": "dog",
                "new_value": "cat",
                "status": "active",
                "supersedes": True,
            }
        ]
    }
    scripted_llm.push(Fault.CUSTOM(json.dumps(answer)), job="annotation")

    result = annotate(make_client(), [ITEMS[0], ITEMS[2]])

    assert result.ops[0] == AnnotatedOp(
        "home_city", "noop", "Berlin", "missing: no operation for this fact", False,
        by_model=True
    )
    assert (result.ops[1].op, result.ops[1].valid) == ("accept", True)


@pytest.mark.parametrize(
    "fault", [Fault.INVALID_JSON, Fault.EMPTY, Fault.WRONG_SCHEMA, Fault.CUSTOM('["accept"]')]
)
def test_unusable_answer_turns_every_item_into_a_noop_and_keeps_the_raw_output(
    make_client: ClientFactory, scripted_llm: ScriptedLLM, fault: Fault
) -> None:
    scripted_llm.push(fault, job="annotation")

    result = annotate(make_client(), ITEMS)

    assert result.failure is not None
    # Every item the model was asked about falls back to noop; new_key (no head) was never
    # asked: it is a create whatever the model answers (SPEC §5.4).
    asked = [op for item, op in zip(ITEMS, result.ops, strict=True) if item.has_head]
    assert [op.op for op in asked] == ["noop"] * len(asked) and len(asked) == len(ITEMS) - 1
    assert all(op.reason.startswith("fallback:") and not op.valid for op in asked)
    assert (result.ops[3].op, result.ops[3].value) == ("accept", "v")
    assert result.raw == scripted_llm_raw(fault)


def test_a_fact_on_a_key_without_a_head_is_a_create_without_a_model_call(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    items = [AnnotationItem("personal_best_5k", "27:12"),
             AnnotationItem("pet", "cat", "hedged", head_value="", head_status="revoked"),
             AnnotationItem("typo", "x", "withdrawn")]
    scripted_llm.push(Fault.CUSTOM(json.dumps({"operations": [
        {"op": "noop", "key": "personal_best_5k", "old_value": None, "new_value": "27:12",
         "status": "unchanged", "supersedes": False}]})), job="annotation")

    result = annotate(make_client(), items)

    assert scripted_llm.counts["annotation"] == 0 and result.calls == 0
    assert ops_of(result) == [("personal_best_5k", "accept", "27:12"), ("pet", "accept", "cat"),
                              ("typo", "noop", "x")]
    assert not any(op.by_model for op in result.ops)


def test_only_facts_on_keys_with_a_head_are_sent_to_the_model(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    result = annotate(make_client(), ITEMS)

    user = scripted_llm.requests_for("annotation")[0].body["messages"][-1]["content"]
    sent = json.loads(user.split("<facts>")[1].split("</facts>")[0])["facts"]
    assert [f["key"] for f in sent] == ["home_city", "mug_1_location", "pet", "age"]
    assert result.calls == 1 and result.ops[3].by_model is False


def scripted_llm_raw(fault: Fault) -> str:
    if fault == Fault.EMPTY:
        return ""
    if fault == Fault.WRONG_SCHEMA:
        return '{"result": "ok"}'
    if fault == Fault.INVALID_JSON:
        return '{"facts": [{"key": "broken'
    return fault.body


def test_server_failure_after_retries_is_a_noop_per_item(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.push(Fault.HTTP_500, job="annotation", times=3)

    result = annotate(make_client(max_retries=2), ITEMS[:3])

    assert isinstance(result.failure, TransportError) and result.failure.status == 500
    assert [op.op for op in result.ops] == ["noop"] * 3
    assert scripted_llm.counts["annotation"] == 3


def test_hard_commit_turns_a_dropped_correction_into_an_accept(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    items = [
        AnnotationItem("a", "new", head_value="old", head_status="active", hard_commit=True),
        AnnotationItem("b", "same", head_value="same", head_status="active", hard_commit=True),
        AnnotationItem("c", "x", "withdrawn", "x", "active", hard_commit=True),
    ]
    scripted_llm.push(Fault.INVALID_JSON, job="annotation")

    result = annotate(make_client(), items)

    assert [op.op for op in result.ops] == ["accept", "noop", "noop"]
    assert result.ops[0].reason.endswith("hard_commit")


def test_reject_of_the_heads_own_value_retracts_the_head(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    answer = {
        "operations": [
            {
                "op": "reject",
                "key": "k",
                "old_value": "v",
                "new_value": None,
                "status": "contradicted",
                "supersedes": False,
            }
        ]
    }
    scripted_llm.push(Fault.CUSTOM(json.dumps(answer)), job="annotation")

    result = annotate(
        make_client(), [AnnotationItem("k", "v", head_value="v", head_status="active")]
    )

    assert (result.ops[0].op, result.ops[0].value) == ("reject", None)


def test_no_items_make_no_call(make_client: ClientFactory, scripted_llm: ScriptedLLM) -> None:
    assert annotate(make_client(), []).ops == []
    assert scripted_llm.counts["annotation"] == 0


def test_scripted_server_follows_suggested_ops(make_client: ClientFactory) -> None:
    items = [
        AnnotationItem("m", "sink 1", "reported", "cabinet 3", "active", op_hint="contest"),
        AnnotationItem(
            "m", "sink 1", "asserted", "cabinet 3", "contested", ["sink 1"], op_hint="resolve"
        ),
    ]

    assert [op.op for op in annotate(make_client(), items).ops] == ["contest", "resolve"]


# --- without a model ----------------------------------------------------------------------

ACTIVE = {"head_value": "Paris", "head_status": "active"}
CONTESTED = {"head_value": "Paris", "head_status": "contested", "alternatives": ["Rome"]}


@pytest.mark.parametrize(
    ("item", "expected_op"),
    [
        (AnnotationItem("k", "Berlin"), "accept"),
        (AnnotationItem("k", "Berlin", **ACTIVE), "accept"),
        (AnnotationItem("k", " paris ", **ACTIVE), "noop"),
        (AnnotationItem("k", "Berlin", "reported", **ACTIVE), "accept"),
        (AnnotationItem("k", "Berlin", "hedged", **ACTIVE), "contest"),
        (AnnotationItem("k", "Paris", "hedged", **ACTIVE), "noop"),
        (AnnotationItem("k", "Berlin", "hedged"), "accept"),
        (AnnotationItem("k", "Paris", "withdrawn", **ACTIVE), "revoke"),
        (AnnotationItem("k", "Lyon", "withdrawn", **ACTIVE), "revoke"),
        (AnnotationItem("k", "Paris", "withdrawn"), "noop"),
        (AnnotationItem("k", "Berlin", "reported", op_hint="contest", **ACTIVE), "contest"),
        (AnnotationItem("k", "Berlin", "reported", op_hint="contest"), "accept"),
        (AnnotationItem("k", "Rome", op_hint="resolve", **CONTESTED), "resolve"),
        (AnnotationItem("k", "Paris", op_hint="resolve", **CONTESTED), "resolve"),
        (AnnotationItem("k", "Oslo", op_hint="resolve", **CONTESTED), "accept"),
        (AnnotationItem("k", "Paris", op_hint="resolve", **ACTIVE), "noop"),
        (AnnotationItem("k", "Berlin", op_hint="reject", **ACTIVE), "reject"),
    ],
)
def test_rule_annotation_without_a_model(item: AnnotationItem, expected_op: str) -> None:
    (op,) = annotate_without_model([item]).ops

    assert op.op == expected_op
    assert op.value == item.new_value and op.valid


def test_rule_annotation_aligns_with_items() -> None:
    result = annotate_without_model(ITEMS)

    assert [op.key for op in result.ops] == [item.key for item in ITEMS]
    assert result.failure is None and result.raw == ""
