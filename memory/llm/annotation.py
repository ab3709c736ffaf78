"""Annotation: choose one typed operation per fact relative to its key's head (SPEC §5.4).

A fact whose key has no head is decided without the model (the paper's deterministic
controller, SPEC §5.4): it is a create, applied as ``accept`` (a ``withdrawn`` one is a noop:
there is nothing to revoke), so no model answer can drop a new key's first value, and an
observation of new keys costs no annotation call. All other facts of one observation go to the
model in ONE schema-constrained call. The answer is then
validated deterministically, item by item, so a misbehaving model can only ever produce noops
(paper A.2): an unknown op, a missing item, or an unparsable answer becomes a noop with its
reason; an op for a key that was never asked about is dropped and logged. Whether an op is valid
in the cell's state (contest needs a head, ...) is the domain state machine's job, not this one.
"""

from __future__ import annotations

import logging
from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from memory.domain import normalize_key, same_value

from . import prompts
from .client import ModelClient, note_failure
from .errors import ModelError, wrong_schema
from .facts import OPS

log = logging.getLogger("pmem.llm")

_HEAD_STATUSES = ("active", "contested")


@dataclass(frozen=True)
class AnnotationItem:
    """One fact to place, with what the annotator may know of its cell.

    ``head_value``/``head_status`` are None for an empty cell; ``alternatives`` are the values
    competing with a contested head. ``hard_commit`` forbids dropping a differing value as noop.
    ``op_hint`` is a rule pattern's suggestion (``Fact.op``), passed on as ``suggested_op``.
    """

    key: str
    new_value: str
    assertion: str = "asserted"
    head_value: str | None = None
    head_status: str | None = None
    alternatives: Sequence[str] = ()
    hard_commit: bool = False
    op_hint: str | None = None

    @property
    def has_head(self) -> bool:
        return self.head_value is not None and (self.head_status or "active") in _HEAD_STATUSES

    @property
    def repeats_head(self) -> bool:
        return self.has_head and same_value(self.new_value, self.head_value or "")


@dataclass(frozen=True)
class AnnotatedOp:
    """The operation chosen for one item. ``value`` is the value it acts on: the fact's value
    (accept, contest, reject, resolve, noop), the value to retract (revoke), or None for a
    reject of the head without replacement. ``valid`` is False when the model's answer for
    this item was missing or invalid and a fallback was used; ``reason`` says why."""

    key: str
    op: str
    value: str | None
    reason: str
    valid: bool
    by_model: bool = False  # True: the model was asked (its answer or a fallback for it)


@dataclass(frozen=True)
class AnnotationResult:
    """``ops`` align 1:1 with the items asked about. ``error`` is set when the whole answer was
    unusable (every op asked of the model is then a fallback); ``raw`` is the model's text as
    received; ``calls`` is 1 when the model was asked, 0 when no item needed it."""

    ops: list[AnnotatedOp] = field(default_factory=list)
    raw: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failure: ModelError | None = None
    calls: int = 0


def item_payload(item: AnnotationItem) -> dict[str, Any]:
    """The JSON the model sees for one item."""
    payload: dict[str, Any] = {
        "key": item.key,
        "value": item.new_value,
        "assertion": item.assertion,
        "head_value": item.head_value,
        "head_status": item.head_status,
        "alternatives": list(item.alternatives),
        "hard_commit": item.hard_commit,
    }
    if item.op_hint:
        payload["suggested_op"] = item.op_hint
    return payload


def annotate(client: ModelClient, items: Sequence[AnnotationItem],
             proposed: Sequence[str | None] = ()) -> AnnotationResult:
    """Annotate every item of one observation: items on a key without a head by the
    deterministic controller (:func:`create_op`), items with an op the model ``proposed`` at
    extraction against the same head by that op (validated as an answer is), the others in
    ONE model call. Never raises on model misbehaviour."""
    decided = {i: op for i, item in enumerate(items) if (op := create_op(item)) is not None}
    for i, (item, patch) in enumerate(zip(items, proposed, strict=False)):
        if patch and i not in decided:
            decided[i] = _hard_commit(item, replace(_validated(item, {"op": patch}),
                                                    reason="model: proposed at extraction"))
    asked = [item for i, item in enumerate(items) if i not in decided]
    answered = _annotate_with_model(client, asked) if asked else AnnotationResult()
    by_model = iter(answered.ops)
    ops = [decided[i] if i in decided else next(by_model) for i in range(len(items))]
    return replace(answered, ops=ops)


def create_op(item: AnnotationItem) -> AnnotatedOp | None:
    """The operation of a fact on a key with no head, decided without asking (SPEC §5.4):
    accept (a create), or noop for a withdrawal (nothing to revoke). None when the key has a
    head (the annotator decides)."""
    if item.has_head:
        return None
    if item.assertion == "withdrawn":
        return AnnotatedOp(item.key, "noop", item.new_value, "rule: nothing to revoke", True)
    return AnnotatedOp(item.key, "accept", item.new_value, "rule: create (no head)", True)


def _annotate_with_model(client: ModelClient,
                         items: Sequence[AnnotationItem]) -> AnnotationResult:
    """Every item in ONE schema-constrained call, validated item by item."""
    result = client.chat_json(
        messages=prompts.annotation_messages([item_payload(item) for item in items]),
        schema=prompts.ANNOTATION_SCHEMA,
        schema_name=prompts.ANNOTATION,
        kind="annotate",
    )
    answered = AnnotationResult(
        raw=result.raw,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        calls=1,
    )
    entries = _operation_entries(result.data) if result.failure is None else None
    failure = result.failure
    if failure is None and entries is None:
        failure = wrong_schema("no operations list")
        note_failure("annotate", failure)
    if entries is None:
        log.warning("annotation fell back to noop (%s): %.200s", failure, result.raw)
        ops = [_hard_commit(item, _fallback(item, f"fallback: {failure}")) for item in items]
        return replace(answered, ops=ops, failure=failure)
    ops = [_hard_commit(item, op) for item, op in zip(items, _match(items, entries), strict=True)]
    return replace(answered, ops=ops)


def _operation_entries(data: Any) -> list[Any] | None:
    """The list of operation objects (``{"operations": [...]}`` or a bare list); None when
    there is no list, or a non-empty one holding no object at all (wrong schema)."""
    if isinstance(data, dict):
        data = data.get("operations")
    if not isinstance(data, list):
        return None
    if data and not any(isinstance(entry, dict) for entry in data):
        return None
    return data


def _match(items: Sequence[AnnotationItem], entries: list[Any]) -> list[AnnotatedOp]:
    """Pair the model's entries with the items by normalised key, in order within a key (one
    observation may move one key twice)."""
    asked = {normalize_key(item.key) for item in items}
    by_key: dict[str, deque[dict[str, Any]]] = defaultdict(deque)
    for entry in entries:
        key = normalize_key(str(entry.get("key", ""))) if isinstance(entry, dict) else ""
        if key in asked:
            by_key[key].append(entry)
        else:
            log.warning("annotation: dropped an operation for a key never asked: %.200r", entry)
    ops = []
    for item in items:
        queue = by_key[normalize_key(item.key)]
        entry = queue.popleft() if queue else None
        ops.append(
            _fallback(item, "missing: no operation for this fact")
            if entry is None
            else _validated(item, entry)
        )
    for key, rest in by_key.items():
        if rest:
            log.warning("annotation: dropped %d surplus operation(s) for %s", len(rest), key)
    return ops


def _validated(item: AnnotationItem, entry: dict[str, Any]) -> AnnotatedOp:
    op = str(entry.get("op", "")).strip().lower()
    if op not in OPS:
        return _fallback(item, f"invalid: unknown op {str(entry.get('op'))[:40]!r}")
    return AnnotatedOp(item.key, op, _value_for(op, item), "annotator", valid=True,
                       by_model=True)


def _value_for(op: str, item: AnnotationItem) -> str | None:
    """The fact's value, except a reject naming the head itself, which retracts the head
    without replacement (reject v = h is otherwise invalid, SPEC §3)."""
    if op == "reject" and item.repeats_head:
        return None
    return item.new_value


def _fallback(item: AnnotationItem, reason: str) -> AnnotatedOp:
    return AnnotatedOp(item.key, "noop", item.new_value, reason, valid=False, by_model=True)


def _hard_commit(item: AnnotationItem, op: AnnotatedOp) -> AnnotatedOp:
    """A hard-committed fact whose value differs from the head is never dropped as noop
    (SPEC §3). A withdrawal is never turned into an accept."""
    if (
        item.hard_commit
        and op.op == "noop"
        and not item.repeats_head
        and item.assertion != "withdrawn"
    ):
        return AnnotatedOp(
            item.key, "accept", item.new_value, f"{op.reason}; hard_commit", op.valid,
            by_model=op.by_model,
        )
    return op


# --- without a model ----------------------------------------------------------------------


def annotate_without_model(items: Sequence[AnnotationItem]) -> AnnotationResult:
    """Deterministic annotation when no model is configured. Per item, in this order:

    - ``op_hint`` resolve: resolve when the head is contested and the value is the head or an
      alternative; otherwise as an asserted fact.
    - ``op_hint`` contest (and ``hedged`` facts): contest a differing head; accept into an empty
      cell; noop (support) when the value repeats the head.
    - any other ``op_hint``: used as given.
    - ``withdrawn``: revoke the version holding the value (the head, an alternative or a closed
      version; the store matches it by value) when the cell has a head, else noop.
    - ``asserted``/``reported``: accept, or noop (support) when the value repeats the head.

    ``hard_commit`` then applies as in :func:`annotate`.
    """
    return AnnotationResult(ops=[_hard_commit(item, _rule_op(item)) for item in items])


def _rule_op(item: AnnotationItem) -> AnnotatedOp:
    hint = (item.op_hint or "").strip().lower()
    if hint == "resolve":
        return _resolve_rule(item)
    if hint == "contest" or (not hint and item.assertion == "hedged"):
        return _contest_rule(item)
    if hint in OPS:
        return AnnotatedOp(item.key, hint, _value_for(hint, item), "rule: op hint", True)
    if item.assertion == "withdrawn":
        if not item.has_head:
            return AnnotatedOp(item.key, "noop", item.new_value, "rule: nothing to revoke", True)
        return AnnotatedOp(item.key, "revoke", item.new_value, "rule: withdrawn", True)
    return _accept_rule(item)


def _accept_rule(item: AnnotationItem) -> AnnotatedOp:
    if item.repeats_head:
        return AnnotatedOp(item.key, "noop", item.new_value, "rule: repeats the head", True)
    return AnnotatedOp(item.key, "accept", item.new_value, f"rule: {item.assertion}", True)


def _contest_rule(item: AnnotationItem) -> AnnotatedOp:
    if not item.has_head:
        return AnnotatedOp(
            item.key, "accept", item.new_value, "rule: contest of an empty cell", True
        )
    if item.repeats_head:
        return AnnotatedOp(item.key, "noop", item.new_value, "rule: repeats the head", True)
    return AnnotatedOp(item.key, "contest", item.new_value, "rule: conflicting report", True)


def _resolve_rule(item: AnnotationItem) -> AnnotatedOp:
    candidates = [item.head_value or "", *item.alternatives]
    if item.head_status == "contested" and any(same_value(item.new_value, c) for c in candidates):
        return AnnotatedOp(item.key, "resolve", item.new_value, "rule: confirmed", True)
    return _accept_rule(item)
