"""The graph services on real PostgreSQL: typed operations, rollback, constraints, locking."""

from __future__ import annotations

import threading
from datetime import UTC

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory.domain import InvalidOperation, OpRequest, OpType
from memory.domain.memgraph import MemGraph
from memory.models import Cell, Operation, SupportEdge, Tombstone, Version
from memory.selectors.cells import cell_detail
from memory.services import CellNotFound, operation_apply

pytestmark = pytest.mark.django_db


def op(ns, key, kind, value=None, version=None, explicit=False, actor="user:test"):
    return operation_apply(namespace=ns, key=key, op=kind, value=value, version_id=version,
                           actor=actor, explicit=explicit)


def test_accept_creates_cell_version_operation_and_support_edge(ns):
    applied = op(ns, "Mug 1 Location", "accept", "table")
    cell = Cell.objects.get(namespace=ns, key="mug_1_location")
    assert cell.head.value == "table" and cell.head.status == "active"
    assert applied.operation.type == "accept" and applied.operation.version_id == cell.head_id
    assert Version.objects.get(pk=cell.head_id).created_by_id == applied.operation.id
    assert SupportEdge.objects.filter(version=cell.head).count() == 1


def test_accept_new_value_supersedes_and_closes_interval(ns):
    op(ns, "k", "accept", "a")
    op(ns, "k", "accept", "b")
    detail = cell_detail(namespace=ns, key="k")
    assert detail.value == "b"
    assert [(h["value"], h["status"]) for h in detail.history] == [("b", "active"),
                                                                    ("a", "superseded")]
    assert detail.history[1]["valid_to"] is not None and detail.history[0]["valid_to"] is None


def test_revoke_reinstates_predecessor_with_tombstone_and_reinstate_operation(ns):
    op(ns, "k", "accept", "a")
    op(ns, "k", "accept", "b")
    applied = op(ns, "k", "revoke")
    detail = cell_detail(namespace=ns, key="k")
    assert detail.value == "a" and detail.status == "active"
    revoked = Version.objects.get(cell__namespace=ns, value="b")
    assert revoked.status == "revoked" and Tombstone.objects.filter(version=revoked).count() == 1
    assert Version.objects.get(cell__namespace=ns, value="a").valid_to is None
    log = list(Operation.objects.filter(namespace=ns).order_by("id").values_list("type", flat=True))
    assert log == ["accept", "accept", "revoke", "reinstate"]
    assert applied.reinstated == (Version.objects.get(cell__namespace=ns, value="a").id,)


def test_invalid_operation_is_logged_as_noop_with_reason(ns):
    op(ns, "k", "accept", "a")
    applied = op(ns, "k", "resolve", "a")
    assert applied.invalid == "invalid: resolve needs a contested cell"
    assert applied.operation.type == "noop" and applied.operation.requested == "resolve"


def test_explicit_invalid_operation_raises_and_writes_nothing(ns):
    op(ns, "k", "accept", "a")
    before = (Operation.objects.count(), Version.objects.count())
    with pytest.raises(InvalidOperation, match="resolve needs a contested cell"):
        op(ns, "k", "resolve", "a", explicit=True)
    assert (Operation.objects.count(), Version.objects.count()) == before


def test_explicit_operation_on_unknown_key_raises_cell_not_found(ns):
    with pytest.raises(CellNotFound):
        op(ns, "nothing_here", "revoke", explicit=True)


def test_non_creating_operation_on_unknown_key_creates_no_cell(ns):
    applied = op(ns, "ghost", "contest", "x")
    assert applied.invalid and not Cell.objects.filter(namespace=ns, key="ghost").exists()


def test_database_refuses_a_second_head(ns):
    op(ns, "k", "accept", "a")
    cell = Cell.objects.get(namespace=ns, key="k")
    with pytest.raises(IntegrityError), transaction.atomic():
        Version.objects.create(namespace=ns, cell=cell, value="b", status="active",
                               valid_from=cell.head.valid_from)


def test_database_refuses_a_forward_supersedes_edge(ns):
    op(ns, "k", "accept", "a")
    cell = Cell.objects.get(namespace=ns, key="k")
    with pytest.raises(IntegrityError), transaction.atomic():
        Version.objects.filter(pk=cell.head_id).update(supersedes_id=cell.head_id + 1000)


@pytest.mark.parametrize("history", [1, 30])
def test_query_count_per_fact_is_bounded_and_flat_in_history(ns, history):
    for i in range(history):
        op(ns, "k", "accept", f"v{i}")
    with CaptureQueriesContext(connection) as accept_q:
        op(ns, "k", "accept", "new")
    with CaptureQueriesContext(connection) as revoke_q:
        op(ns, "k", "revoke")
    # One statement of each is the change feed's (its events, cursors and notice).
    assert len(accept_q) <= 11, [q["sql"] for q in accept_q]
    assert len(revoke_q) <= 13, [q["sql"] for q in revoke_q]


def test_rollback_reads_only_the_nearest_predecessor_on_a_long_chain(ns):
    """Revoke on a 200-version chain issues the same queries as on a 2-version chain."""
    for i in range(200):
        op(ns, "long", "accept", f"v{i}")
    op(ns, "short", "accept", "a")
    op(ns, "short", "accept", "b")
    with CaptureQueriesContext(connection) as long_q:
        op(ns, "long", "revoke")
    with CaptureQueriesContext(connection) as short_q:
        op(ns, "short", "revoke")
    assert len(long_q) == len(short_q)
    assert cell_detail(namespace=ns, key="long").value == "v198"


STEP = st.one_of(
    st.tuples(st.sampled_from(["accept", "reject", "contest", "resolve"]),
              st.sampled_from(["a", "b", "c", "d"]), st.none()),
    st.tuples(st.sampled_from(["revoke", "reject", "noop"]), st.none(), st.none()),
    st.tuples(st.just("revoke"), st.none(), st.integers(0, 8)),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(STEP, max_size=25))
def test_services_match_the_pure_core_on_random_sequences(make_namespace, steps):
    """Every operation in every cell state: the database ends where the pure core ends."""
    ns = make_namespace("prop")
    mem = MemGraph()
    db_ids: list[int] = []  # db version ids in creation order, to translate indexes
    for kind, value, index in steps:
        mem_version = index + 1 if index is not None else None
        db_version = db_ids[index] if index is not None and index < len(db_ids) else (
            -1 if index is not None else None)
        try:
            mem.apply("k", OpRequest(OpType(kind), value, mem_version))
        except InvalidOperation:
            pass
        op(ns, "k", kind, value, db_version)
        db_ids = list(Version.objects.filter(cell__namespace=ns).order_by("id")
                      .values_list("id", flat=True))
    rows = list(Version.objects.filter(cell__namespace=ns).order_by("id"))
    assert [(v.value, v.status, v.support) for v in rows] == [
        (v.value, str(v.status), v.support) for v in mem.versions.values()]
    index_of = {v.id: i + 1 for i, v in enumerate(rows)}
    assert [index_of.get(v.supersedes_id) for v in rows] == [
        v.supersedes_id for v in mem.versions.values()]
    heads = [v for v in rows if v.status in ("active", "contested")]
    assert len(heads) <= 1
    cell = Cell.objects.filter(namespace=ns, key="k").first()
    assert (cell.head_id if cell else None) == (heads[0].id if heads else None)


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_leave_one_head_and_linear_chains(make_namespace):
    ns = make_namespace("conc")
    keys = ["shared", "k1", "k2"]
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(10):
                key = keys[0] if i % 2 == 0 else keys[1 + (n + i) % 2]
                operation_apply(namespace=ns, key=key, op="accept", value=f"t{n}-{i}",
                                actor=f"user:t{n}")
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for key in keys:
        cell = Cell.objects.get(namespace=ns, key=key)
        versions = list(Version.objects.filter(cell=cell).order_by("id"))
        assert sum(v.status == "active" for v in versions) == 1
        assert cell.head_id == versions[-1].id
        # linear: every version but the first supersedes exactly its predecessor in commit order
        assert [v.supersedes_id for v in versions] == [None] + [v.id for v in versions[:-1]]
        values = [v.value for v in versions]
        assert len(values) == len(set(values))
    total = Version.objects.filter(cell__namespace=ns).count()
    assert total == 80


def _batch(ns, items):
    from memory.services.graph import OpInput, apply_batch

    with transaction.atomic():
        return apply_batch(namespace=ns, items=[
            (OpInput(key=k, op=OpType(o), value=v), "extractor") for k, o, v in items])


def test_a_batch_applies_facts_on_one_key_in_order(ns):
    _batch(ns, [("k", "accept", "a"), ("k", "accept", "b"), ("k", "contest", "c"),
                ("k", "accept", "d"), ("k", "revoke", None)])
    detail = cell_detail(namespace=ns, key="k")
    assert detail.value == "b" and detail.status == "active"
    assert [(h["value"], h["status"]) for h in detail.history] == [
        ("d", "revoked"), ("c", "superseded"), ("b", "active"), ("a", "superseded")]
    types = list(Operation.objects.filter(namespace=ns).order_by("id").values_list("type", flat=True))
    assert types == ["accept", "accept", "contest", "accept", "revoke", "reinstate"]


def test_a_batch_matches_the_pure_core_applied_one_by_one(ns):
    items = [("k1", "accept", "a"), ("k2", "accept", "x"), ("k1", "accept", "b"),
             ("k1", "reject", "c"), ("k2", "contest", "y"), ("k1", "revoke", None),
             ("k2", "resolve", "y"), ("k2", "revoke", None), ("k1", "noop", None)]
    _batch(ns, items)
    mem = MemGraph()
    for key, kind, value in items:
        try:
            mem.apply(key, OpRequest(OpType(kind), value))
        except InvalidOperation:
            pass
    for key in ("k1", "k2"):
        db = [(v.value, v.status, v.support) for v in
              Version.objects.filter(cell__namespace=ns, cell__key=key).order_by("id")]
        ref = [(v.value, str(v.status), v.support) for v in mem.versions.values() if v.key == key]
        assert db == ref
        assert cell_detail(namespace=ns, key=key).value == mem.head_value(key)


@pytest.mark.parametrize("n_facts", [1, 10, 40])
def test_statements_per_observation_do_not_grow_with_its_facts(ns, n_facts):
    _batch(ns, [(f"key_{i}", "accept", "old") for i in range(n_facts)])
    with CaptureQueriesContext(connection) as queries:
        _batch(ns, [(f"key_{i}", "accept", "new") for i in range(n_facts)])
    assert len(queries) <= 12, [q["sql"][:80] for q in queries]


# --- SPEC §8: source trust and valid time -----------------------------------------------------


def _observe(ns, text, source="", observed_at=None):
    from memory.services import observation_ingest

    return observation_ingest(namespace=ns, text=text, source=source, observed_at=observed_at)


def test_less_trusted_source_contests_instead_of_superseding(ns):
    from memory.models import SourceTrust

    SourceTrust.objects.create(namespace=ns, source="registry", level=10)
    SourceTrust.objects.create(namespace=ns, source="gossip", level=1)
    _observe(ns, "ceo = Dana", source="registry")
    _observe(ns, "ceo = Sam", source="gossip")
    detail = cell_detail(namespace=ns, key="ceo")
    assert detail.value == "Dana" and detail.status == "contested"
    assert [a["value"] for a in detail.alternatives] == ["Sam"]
    _observe(ns, "ceo = Lee", source="registry")  # an equally trusted source supersedes
    assert cell_detail(namespace=ns, key="ceo").value == "Lee"


def test_without_trust_levels_every_source_supersedes(ns):
    _observe(ns, "ceo = Dana", source="registry")
    _observe(ns, "ceo = Sam", source="gossip")
    assert cell_detail(namespace=ns, key="ceo").value == "Sam"


def test_late_report_goes_into_history_at_its_valid_time_not_the_head(ns):
    from datetime import datetime

    def day(d):
        return datetime(2026, 11, d, tzinfo=UTC)

    _observe(ns, "office = Berlin", observed_at=day(1))
    _observe(ns, "office = Lisbon", observed_at=day(20))
    _observe(ns, "office = Madrid", observed_at=day(10))  # arrives last, happened in between
    detail = cell_detail(namespace=ns, key="office")
    assert detail.value == "Lisbon"
    madrid = next(h for h in detail.history if h["value"] == "Madrid")
    assert madrid["status"] == "superseded"
    assert (madrid["valid_from"], madrid["valid_to"]) == (day(10), day(20))
    berlin = Version.objects.get(cell__namespace=ns, value="Berlin")
    assert Version.objects.get(pk=madrid["version"]).supersedes_id == berlin.id
    operation_apply(namespace=ns, key="office", op="revoke", actor="user:t")
    assert cell_detail(namespace=ns, key="office").value == "Berlin"  # rollback follows arrival


def test_hard_commit_overrides_neither_trust_nor_valid_time(ns):
    """SPEC §8: the probe's rumor (level 1) with hard_commit over hr's head (level 9) is a
    contest, and a hard_commit reported late goes into the history."""
    from datetime import datetime

    from memory.models import SourceTrust
    from memory.services import observation_ingest

    SourceTrust.objects.create(namespace=ns, source="hr", level=9)
    SourceTrust.objects.create(namespace=ns, source="rumor", level=1)
    _observe(ns, "salary = 120k", source="hr", observed_at=datetime(2026, 11, 5, tzinfo=UTC))
    observation_ingest(namespace=ns, facts=[{"key": "salary", "value": "555k",
                                             "hard_commit": True}], source="rumor")
    detail = cell_detail(namespace=ns, key="salary")
    assert (detail.value, detail.status) == ("120k", "contested")
    assert [a["value"] for a in detail.alternatives] == ["555k"]
    observation_ingest(namespace=ns, facts=[{"key": "salary", "value": "90k",
                                             "hard_commit": True}],
                       source="hr", observed_at=datetime(2026, 11, 1, tzinfo=UTC))
    detail = cell_detail(namespace=ns, key="salary")
    assert detail.value == "120k"
    late = next(h for h in detail.history if h["value"] == "90k")
    assert late["status"] == "superseded"


@pytest.mark.django_db(transaction=True)
def test_a_human_operation_moves_the_cells_embedding_with_its_head(make_namespace):
    ns = make_namespace("embed")
    operation_apply(namespace=ns, key="desk_lamp_location", op="accept", value="attic",
                    actor="user:t")
    operation_apply(namespace=ns, key="desk_lamp_location", op="accept", value="garage",
                    actor="user:t")
    cell = Cell.objects.get(namespace=ns, key="desk_lamp_location")
    assert cell.embedded_text == "desk_lamp_location: garage" and cell.embedding is not None
    operation_apply(namespace=ns, key="desk_lamp_location", op="revoke", actor="user:t")
    cell.refresh_from_db()
    assert cell.embedded_text == "desk_lamp_location: attic"
