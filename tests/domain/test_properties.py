"""Property-based tests: random operation sequences through the pure core, checked against
the graph invariants and against a tiny reference model of commits and retractions."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memory.domain import HEAD_STATUSES, InvalidOperation, OpRequest, OpType, Status
from memory.domain.memgraph import MemGraph

K = "k"
VALUES = st.sampled_from(["a", "b", "c", "d", "e"])

step = st.one_of(
    st.tuples(st.just("accept"), VALUES, st.none()),
    st.tuples(st.just("reject"), VALUES, st.none()),
    st.tuples(st.just("reject"), st.none(), st.none()),
    st.tuples(st.just("contest"), VALUES, st.none()),
    st.tuples(st.just("revoke"), st.none(), st.none()),
    st.tuples(st.just("revoke"), st.none(), st.integers(1, 12)),
    st.tuples(st.just("resolve"), VALUES, st.none()),
    st.tuples(st.just("noop"), st.none(), st.none()),
    st.tuples(st.just("restore"), st.none(), st.integers(1, 12)),
)


def run(steps: list[tuple[str, str | None, int | None]]) -> MemGraph:
    g = MemGraph()
    for op, value, version in steps:
        try:
            g.apply(K, OpRequest(OpType(op), value, version))
        except InvalidOperation:
            pass
        check_invariants(g)
    return g


def check_invariants(g: MemGraph) -> None:
    heads = [v for v in g.versions.values() if v.status in HEAD_STATUSES]
    assert len(heads) <= 1, "two heads for one key"
    assert g.heads.get(K) == (heads[0].id if heads else None), "head pointer disagrees"
    for v in g.versions.values():
        assert v.supersedes_id is None or v.supersedes_id < v.id, "supersedes must point back"
        if v.status == Status.REVOKED:
            assert v.tombstones >= 1
    alternatives = [v for v in g.versions.values() if v.status == Status.ALTERNATIVE]
    if alternatives:
        assert heads and heads[0].status == Status.CONTESTED, "alternatives need a contested head"
    if heads and heads[0].status == Status.CONTESTED:
        assert alternatives, "a contested head needs an alternative"


def snapshot(g: MemGraph) -> list[tuple]:
    return [(v.id, v.value, v.status, v.supersedes_id, v.alternative_of_id, v.support,
             v.tombstones, v.valid_to is None) for v in g.versions.values()]


@settings(max_examples=400, deadline=None)
@given(st.lists(step, max_size=40))
def test_random_sequences_keep_one_head_and_backward_acyclic_chains(steps):
    run(steps)


@settings(max_examples=200, deadline=None)
@given(st.lists(step, max_size=40))
def test_versions_are_never_deleted_or_changed_in_value(steps):
    g = MemGraph()
    seen: dict[int, str] = {}
    for op, value, version in steps:
        try:
            g.apply(K, OpRequest(OpType(op), value, version))
        except InvalidOperation:
            pass
        for vid, val in seen.items():
            assert g.versions[vid].value == val
        seen = {vid: v.value for vid, v in g.versions.items()}


@settings(max_examples=200, deadline=None)
@given(st.lists(step, max_size=40))
def test_replaying_the_same_sequence_gives_the_same_graph(steps):
    assert snapshot(run(steps)) == snapshot(run(steps))


commit_step = st.one_of(
    st.tuples(st.just("accept"), VALUES),
    st.tuples(st.just("reject"), VALUES),
    st.tuples(st.just("revoke"), st.none()),
    st.tuples(st.just("reject"), st.none()),
)


def reference_head(steps: list[tuple[str, str | None]]) -> str | None:
    """The reference model: a stack of commits; a retraction pops the top, then anything
    below it that was recorded wrong (contradicted) or revoked."""
    stack: list[list] = []  # [value, wrong]

    def pop_retracted() -> None:
        while stack and stack[-1][1]:
            stack.pop()

    for op, value in steps:
        top = stack[-1][0] if stack else None
        if op in ("accept", "reject") and value is not None:
            if top is not None and top.casefold() == value.casefold():
                continue  # accept of the head: support; reject of the head: invalid
            if op == "reject" and stack:
                stack[-1][1] = True
            stack.append([value, False])
        elif stack:  # revoke / reject without a value
            stack.pop()
            pop_retracted()
    return stack[-1][0] if stack else None


@settings(max_examples=500, deadline=None)
@given(st.lists(commit_step, max_size=40))
def test_head_matches_reference_model_of_commits_and_retractions(steps):
    g = MemGraph()
    for i, (op, value) in enumerate(steps):
        try:
            g.apply(K, OpRequest(OpType(op), value))
        except InvalidOperation:
            pass
        assert g.head_value(K) == reference_head(steps[: i + 1])


@settings(max_examples=200, deadline=None)
@given(st.lists(VALUES, min_size=1, max_size=20, unique=True), st.data())
def test_k_retractions_reinstate_value_before_k_most_recent_commits(values, data):
    g = MemGraph()
    for v in values:
        g.apply(K, OpRequest(OpType.ACCEPT, v))
    k = data.draw(st.integers(1, len(values)))
    for _ in range(k):
        g.apply(K, OpRequest(OpType.REVOKE))
    expected = values[len(values) - k - 1] if k < len(values) else None
    assert g.head_value(K) == expected


# --- restore (SPEC §3) --------------------------------------------------------------

restore_step = st.one_of(commit_step, st.tuples(st.just("restore"), st.integers(0, 40)))


def _retracted(g: MemGraph) -> list[int]:
    return [v.id for v in g.versions.values() if v.status in (Status.REVOKED, Status.CONTRADICTED)]


@settings(max_examples=500, deadline=None)
@given(st.lists(restore_step, max_size=40))
def test_restore_is_an_accept_of_the_restored_value_in_the_reference_model(steps):
    """The reference model of commits and retractions, with restore: restoring a retracted
    version pushes its value like an accept (unless it equals the top), so later retractions
    walk back past it to what was the head before the undo."""
    g = MemGraph()
    seen: list[tuple[str, str | None]] = []
    for op, arg in steps:
        if op == "restore":
            retracted = _retracted(g)
            if not retracted:
                continue
            target = retracted[int(arg or 0) % len(retracted)]
            value = g.versions[target].value
            g.apply(K, OpRequest(OpType.RESTORE, None, target))
            seen.append(("accept", value))
            assert g.versions[target].status in (Status.REVOKED, Status.CONTRADICTED)
        else:
            try:
                g.apply(K, OpRequest(OpType(op), arg))
            except InvalidOperation:
                pass
            seen.append((op, arg))
        check_invariants(g)
        assert g.head_value(K) == reference_head(seen)


@settings(max_examples=300, deadline=None)
@given(st.lists(step, min_size=1, max_size=30), st.sampled_from(["revoke", "reject"]))
def test_retracting_the_head_then_restoring_it_brings_its_value_back(steps, retraction):
    g = run(steps)
    head_id = g.heads.get(K)
    if head_id is None:
        return
    value = g.versions[head_id].value
    g.apply(K, OpRequest(OpType(retraction)))
    g.apply(K, OpRequest(OpType.RESTORE, None, head_id))
    check_invariants(g)
    assert g.head_value(K) is not None and g.head_value(K).casefold() == value.casefold()
    assert g.versions[head_id].status in (Status.REVOKED, Status.CONTRADICTED)
