"""``?wait=1`` is woken by the commit's notice (LISTEN/NOTIFY), not by polling: a waiter
looks at its row once before sleeping and once when the notice wakes it, however long the
commit takes, and the look that finds it settled is the answer; a failure wakes it the same
way."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory.models import Evidence, Version
from memory.selectors import settled
from memory.selectors.observations import observation_detail, observation_when_settled
from memory.services import (
    namespace_drain,
    observation_fail,
    observation_ingest,
    observation_record,
)
from tests.support.worker import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def no_safety_poll(monkeypatch: pytest.MonkeyPatch) -> None:
    """The safety net's looks pushed past the test: only a notice can end a wait early."""
    monkeypatch.setattr(settled, "SAFETY_POLL_SECONDS", 600.0)


def _waiting(evidence_id: int) -> tuple[threading.Thread, dict[str, Any]]:
    """Wait for ``evidence_id`` on a thread of its own, as a request would; its queries and
    what it got are in the dict once it ends."""
    out: dict[str, Any] = {}

    def wait() -> None:
        try:
            with CaptureQueriesContext(connection) as queries:
                out["evidence"] = observation_when_settled(evidence_id, timeout=120)
            out["queries"] = [q["sql"] for q in queries.captured_queries]
        finally:
            connection.close()

    thread = threading.Thread(target=wait)
    thread.start()
    wait_until(lambda: settled.LISTENER.waiting(evidence_id), message="the waiter")
    return thread, out


def test_a_wait_is_woken_by_the_commit(ns, no_safety_poll):
    evidence = observation_record(namespace=ns, facts=[{"key": "k", "value": "v"}]).evidence
    thread, out = _waiting(evidence.pk)
    delivered = settled.LISTENER.delivered
    namespace_drain(namespace_id=ns.pk)  # commits it, announcing it in its transaction
    thread.join(timeout=60)
    assert out["evidence"].state == "committed"
    assert len(out["queries"]) <= 2  # a look before sleeping, one after the notice: the row
    assert settled.LISTENER.delivered > delivered
    assert not settled.LISTENER.waiting(evidence.pk)  # nothing left behind


def test_a_wait_is_woken_by_a_failure(ns, no_safety_poll):
    evidence = observation_record(namespace=ns, text="k = v").evidence
    thread, out = _waiting(evidence.pk)
    assert observation_fail(evidence_id=evidence.pk, error="given up")
    thread.join(timeout=60)
    assert out["evidence"].state == "failed" and len(out["queries"]) <= 2


def test_a_settled_observation_answers_at_once(ns):
    evidence = observation_record(namespace=ns, facts=[{"key": "k", "value": "v"}]).evidence
    namespace_drain(namespace_id=ns.pk)
    with CaptureQueriesContext(connection) as queries:
        assert observation_when_settled(evidence.pk, timeout=120).state == "committed"
    assert len(queries.captured_queries) == 1


def test_a_wait_runs_out_with_the_observation_as_it_is(ns):
    evidence = observation_record(namespace=ns, facts=[{"key": "k", "value": "v"}]).evidence
    assert observation_when_settled(evidence.pk, timeout=0.05).state == "pending"


def test_the_answer_reads_operations_with_their_versions_in_one_statement(ns):
    # What a woken request pays after the commit: its row (above), then the operations with
    # each version's status and ordinal in one join, then the extraction's parts.
    evidence = observation_ingest(namespace=ns, facts=[{"key": f"k{i}", "value": "v"}
                                                       for i in range(30)])
    with CaptureQueriesContext(connection) as queries:
        detail = observation_detail(evidence)
    assert len(queries.captured_queries) == 2
    assert [(op["ordinal"], op["status"]) for op in detail["operations"]] == [(1, "active")] * 30


def _post(api: Any, ns: Any, body: dict[str, Any], query: str = "?wait=1") -> Any:
    return api.post(f"/api/v1/namespaces/{ns.name}/observations/{query}", body, format="json")


def test_a_wait_without_a_model_is_committed_by_the_request_itself(ns, api):
    """No worker runs here: the request records and commits its observation in one
    transaction, and answers with its operations — nothing is queued for a worker."""
    r = _post(api, ns, {"facts": [{"key": "k", "value": "v"}, {"key": "j", "value": "w"}]})
    assert r.status_code == 201, r.json()
    body = r.json()
    assert body["status"] == "committed" and body["replayed"] is False
    assert [(o["op"], o["key"], o["status"]) for o in body["operations"]] == [
        ("accept", "k", "active"), ("accept", "j", "active")]
    evidence = Evidence.objects.get(pk=body["id"])
    assert evidence.state == "committed" and evidence.seq == 1


def test_a_wait_behind_an_unsettled_observation_takes_its_turn(ns, api, no_safety_poll):
    """An observation recorded earlier and not committed yet comes first: the request records
    its own, waits, and is answered once the drain has committed both, in seq order."""
    first = observation_record(namespace=ns, facts=[{"key": "k", "value": "first"}]).evidence
    out: dict[str, Any] = {}

    def post() -> None:
        try:
            out["response"] = _post(api, ns, {"facts": [{"key": "k", "value": "second"}]})
        finally:
            connection.close()

    thread = threading.Thread(target=post)
    thread.start()
    wait_until(lambda: Evidence.objects.filter(namespace=ns).count() == 2, message="recorded")
    second = Evidence.objects.get(namespace=ns, seq=2)
    assert second.state == "pending" and thread.is_alive()  # recorded, not committed: waiting
    namespace_drain(namespace_id=ns.pk)
    thread.join(timeout=60)
    body = out["response"].json()
    assert out["response"].status_code == 201 and body["seq"] == 2
    assert [(o["op"], o["value"], o["status"]) for o in body["operations"]] == [
        ("accept", "second", "active")]
    first.refresh_from_db()
    assert first.state == "committed"
    assert Version.objects.get(cell__namespace=ns, cell__key="k", status="active").value \
        == "second"  # seq order: the later observation's value is the one that holds


def test_a_wait_replays_an_idempotency_key_instead_of_committing_again(ns, api):
    body = {"facts": [{"key": "k", "value": "v"}], "idempotency_key": "once"}
    first = _post(api, ns, body)
    again = _post(api, ns, body)
    assert first.status_code == 201 and again.status_code == 201
    assert again.json()["replayed"] is True and again.json()["id"] == first.json()["id"]
    assert _post(api, ns, {**body, "facts": [{"key": "k", "value": "w"}]}).status_code == 409
    assert Evidence.objects.filter(namespace=ns).count() == 1
