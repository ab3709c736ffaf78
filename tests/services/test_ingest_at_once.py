"""``observation_ingest`` without a model records and commits an observation in ONE
transaction when nothing is ahead of it: the seq order still holds when another
observation is recorded while the ingest waits for its seq, and the transaction pays only
for the graph it writes."""

from __future__ import annotations

import threading

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from memory.models import Evidence
from memory.selectors.cells import cell_value
from memory.services import observation_commit_at_once, observation_ingest, observation_record
from memory.services.binding import pipelined
from tests.support.worker import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def _lock_waiters() -> int:
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
        return int(cur.fetchone()[0])


def test_an_observation_recorded_while_the_ingest_waits_for_its_seq_commits_first(ns):
    # The recording holds the namespace row (its seq) until it commits; the ingest, holding
    # the drain, waits for that row to take the next seq. Once it has it, the earlier
    # observation is pending: the ingest must not commit past it.
    recorded = threading.Event()

    def record() -> None:
        try:
            with transaction.atomic():
                observation_record(namespace=ns, facts=[{"key": "k", "value": "first"}])
                recorded.set()
                wait_until(_lock_waiters, message="the ingest waiting for the seq")
        finally:
            connection.close()

    recorder = threading.Thread(target=record)
    recorder.start()
    assert recorded.wait(30)
    second = observation_ingest(namespace=ns, facts=[{"key": "k", "value": "second"}])
    recorder.join(30)
    first = Evidence.objects.get(namespace=ns, seq=second.seq - 1)
    assert first.state == second.state == "committed"
    assert first.committed_at <= second.committed_at
    assert cell_value(namespace=ns, key="k").value == "second"  # applied in seq order


def test_the_ingest_neither_re_reads_nor_nests_what_it_recorded(ns):
    facts = [{"key": f"k{i}", "value": f"v{i}"} for i in range(30)]
    with CaptureQueriesContext(connection) as captured:
        evidence = observation_ingest(namespace=ns, facts=facts)
    sqls = [q["sql"] for q in captured.captured_queries]
    assert evidence.state == "committed"
    assert sqls.count("COMMIT") == 1
    assert not any(s.startswith(("SAVEPOINT", "RELEASE SAVEPOINT")) for s in sqls), sqls
    assert not any("FOR UPDATE" in s and "memory_evidence" in s for s in sqls), sqls


def test_a_statement_failing_in_a_pipeline_raises_djangos_error(ns):
    evidence = observation_ingest(namespace=ns, facts=[{"key": "k", "value": "v"}])
    with pytest.raises(IntegrityError), transaction.atomic(), pipelined():
        with connection.cursor() as cur:  # the same seq twice in one namespace
            cur.execute("UPDATE memory_evidence SET seq = seq WHERE id = %s", [evidence.pk])
            cur.execute("INSERT INTO memory_evidence (namespace_id, seq, text, source,"
                        " received_at, actor, state, error, chat_calls, embed_calls,"
                        " prompt_tokens, completion_tokens) SELECT namespace_id, seq, '', '',"
                        " now(), '', 'pending', '', 0, 0, 0, 0 FROM memory_evidence"
                        " WHERE id = %s", [evidence.pk])
    assert Evidence.objects.filter(namespace=ns).count() == 1


def test_the_ingest_writes_its_evidence_row_once_and_returns_it_as_stored(ns):
    # Inserted as it is once its commit is done: no second write of the row (every index
    # entry twice), and no read of it afterwards — what it returns is what is stored.
    facts = [{"key": f"k{i}", "value": f"v{i}"} for i in range(5)]
    with CaptureQueriesContext(connection) as captured:
        evidence = observation_ingest(namespace=ns, facts=facts, source="crm")
    sqls = [q["sql"] for q in captured.captured_queries]
    assert not any(s.startswith("UPDATE memory_evidence") for s in sqls), sqls
    assert not any(s.startswith("SELECT") and "FROM \"memory_evidence\"" in s for s in sqls), sqls
    stored = Evidence.objects.get(pk=evidence.pk)
    for field in ("seq", "state", "committed_at", "received_at", "extracted", "facts", "source",
                  "error", "chat_calls", "embed_calls", "prompt_tokens", "completion_tokens"):
        assert getattr(evidence, field) == getattr(stored, field), field
    assert stored.state == "committed" and stored.committed_at >= stored.received_at
    assert [f["key"] for f in stored.extracted["facts"]] == [f["key"] for f in facts]


def test_an_earlier_idempotency_key_sends_the_ingest_the_usual_way(ns, caplog):
    first = observation_commit_at_once(namespace=ns, facts=[{"key": "k", "value": "v"}],
                                       idempotency_key="once", hand_on=lambda _ns: None)
    assert first is not None and first.state == "committed"
    again = observation_commit_at_once(namespace=ns, facts=[{"key": "k", "value": "v"}],
                                       idempotency_key="once", hand_on=lambda _ns: None)
    assert again is None  # nothing kept: observation_record answers the replay
    assert Evidence.objects.filter(namespace=ns).count() == 1
    # Seen by the insert's own look, not by the unique index failing the transaction.
    assert "ingest in one transaction failed" not in caplog.text
