"""Group commit without a model (docs/decisions.md 14): consecutive observations committed in
one transaction, each planned against what the previous one wrote, and nothing computed
inside that transaction but the graph itself."""

from __future__ import annotations

import logging
import time

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from memory.llm.embedding import HashingEmbedder
from memory.models import Evidence
from memory.selectors.cells import cell_value
from memory.services import observation_ingest, observations_ingest

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_group_plans_each_observation_against_the_previous_ones(ns):
    # The third observation withdraws a value only the second one installed, in the same
    # transaction: annotation must see it as the head to revoke it (and roll back to shelf 2).
    with CaptureQueriesContext(connection) as captured:
        evidence = observations_ingest(namespace=ns, observations=[
            {"text": "Update: mug 1 has been moved from table 1 to shelf 2."},
            {"text": "Update: mug 1 has been moved from shelf 2 to cabinet 3."},
            {"text": "The move of mug 1 to cabinet 3 was reported in error."},
        ])
    assert sum(1 for q in captured.captured_queries if q["sql"] == "COMMIT") == 2
    assert [e.state for e in evidence] == ["committed"] * 3
    assert [o.type for o in evidence[2].operations.exclude(type="reinstate")] == ["revoke"]
    # each observation's versions begin when it was applied, as if committed on its own
    from memory.models import Version

    starts = list(Version.objects.filter(cell__namespace=ns, cell__key="mug_1_location")
                  .order_by("id").values_list("valid_from", flat=True))
    assert len(starts) == 2 and starts[0] < starts[1]
    # the revoke named a version the group itself created: its log shows the stored id
    revoke = evidence[2].operations.get(type="revoke")
    assert revoke.payload["version"] == revoke.version_id > 0
    assert revoke.payload["head_before"] == revoke.version_id
    assert all(e.get("version_id") is None or e["version_id"] > 0
               for e in revoke.payload["effects"])
    assert cell_value(namespace=ns, key="mug_1_location").value == "shelf 2"
    # the commit stored each extraction and evidence vector it computed
    assert all(e.extracted["facts"] and e.embedding is not None
               for e in Evidence.objects.filter(pk__in=[e.pk for e in evidence]))


def test_no_vector_is_computed_inside_the_commit_transaction(ns, monkeypatch):
    seen: list[bool] = []

    def spying(name):
        original = getattr(HashingEmbedder, name)

        def spy(self, texts):
            seen.append(connection.in_atomic_block)
            return original(self, texts)
        return spy

    for name in ("embed", "embed_arrays"):  # every way in to the embedder
        monkeypatch.setattr(HashingEmbedder, name, spying(name))
    observations_ingest(namespace=ns, observations=[
        {"facts": [{"key": f"k{i}", "value": f"v{i}"}, {"key": "shared", "value": f"s{i}"}]}
        for i in range(5)])
    assert seen and not any(seen)


@pytest.mark.django_db(transaction=True)
def test_a_commit_aborted_by_a_deadlock_is_run_again_not_failed(ns, caplog):
    # Another writer holds key "b" and then asks for key "a" while the commit holds "a" and
    # waits for "b": PostgreSQL aborts one of them (the commit, which waited first). The
    # observation must be committed by running it again, once, not marked failed.
    import threading

    from memory.models import Cell, Evidence, Operation

    observation_ingest(namespace=ns, facts=[{"key": "a", "value": "1"}, {"key": "b", "value": "1"}])
    holding, done = threading.Event(), threading.Event()
    errors = []

    def other_writer():
        try:
            with transaction.atomic():
                list(Cell.objects.select_for_update().filter(namespace=ns, key="b"))
                holding.set()
                with connection.cursor() as cur:
                    for _ in range(200):  # until the commit waits for "b"
                        cur.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
                        if cur.fetchone()[0]:
                            break
                        time.sleep(0.02)
                list(Cell.objects.select_for_update().filter(namespace=ns, key="a"))
        except Exception as exc:  # the deadlock victim may be this side too
            errors.append(exc)
        finally:
            connection.close()
            done.set()

    caplog.set_level(logging.WARNING, logger="pmem.observations")
    thread = threading.Thread(target=other_writer)
    thread.start()
    assert holding.wait(30)
    evidence = observation_ingest(namespace=ns, facts=[{"key": "a", "value": "2"},
                                                       {"key": "b", "value": "2"}])
    thread.join(30)
    assert not errors  # the commit, which waited first, was the deadlock's victim
    assert any("running it again" in r.getMessage() for r in caplog.records)
    assert evidence.state == Evidence.State.COMMITTED, evidence.error
    assert Operation.objects.filter(evidence=evidence).count() == 2  # once, not twice
    assert {c.key: c.head.value for c in Cell.objects.filter(namespace=ns)} == {"a": "2", "b": "2"}


def test_one_observation_in_process_is_recorded_and_committed_in_one_transaction(ns):
    # One WAL flush instead of two: nothing is acknowledged before the one commit.
    with CaptureQueriesContext(connection) as captured:
        evidence = observation_ingest(namespace=ns, facts=[{"key": "k", "value": "v"}])
    assert sum(1 for q in captured.captured_queries if q["sql"] == "COMMIT") == 1
    assert evidence.state == "committed" and evidence.embedding is not None
    assert cell_value(namespace=ns, key="k").value == "v"


def test_an_observation_behind_an_unsettled_one_waits_its_turn(ns):
    from memory.services import observation_record

    first = observation_record(namespace=ns, facts=[{"key": "k", "value": "first"}]).evidence
    second = observation_ingest(namespace=ns, facts=[{"key": "k", "value": "second"}])
    assert Evidence.objects.get(pk=first.pk).state == second.state == "committed"
    assert first.seq < second.seq
    assert cell_value(namespace=ns, key="k").value == "second"
