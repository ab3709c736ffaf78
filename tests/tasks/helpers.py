"""Helpers for the task tests: record and enqueue observations, wait, check the invariants."""

from __future__ import annotations

from collections import Counter

from django.db.models import Count, Q

from memory.models import Cell, Evidence, Namespace, Operation, Version
from memory.services import observation_record
from memory.tasks import process_observation
from tests.support.worker import CeleryWorker, wait_settled, wait_until


def told(text: str) -> str:
    """``text`` after a line the rule extractor does not understand, so that the model reads
    all of it: text the rules understand whole never reaches the model (SPEC §5.4)."""
    return f"They told me this.\n{text}"


def record(ns: Namespace, text: str) -> Evidence:
    return observation_record(namespace=ns, text=text, actor="test").evidence


_SENT: list[str] = []  # ids of the tasks this test sent, for wait_tasks_done


def enqueue(evidence: Evidence) -> None:
    _SENT.append(process_observation.delay(evidence.pk).id)


def forget_sent() -> None:
    """Stop waiting for tasks sent so far (a killed worker's tasks never finish)."""
    _SENT.clear()


def submit(ns: Namespace, *texts: str) -> list[Evidence]:
    """Record each text, then enqueue it for the worker (as the API does after commit)."""
    out = []
    for text in texts:
        evidence = record(ns, text)
        enqueue(evidence)
        out.append(evidence)
    return out


def wait_tasks_done(worker: CeleryWorker, timeout: float = 30.0) -> None:
    """Wait until every task sent has finished in the worker. An observation is visible as
    committed before its task ends: the embedding refresh runs after the commit."""
    pending = list(_SENT)

    def done() -> bool:
        log = worker.log_text()
        return all(f"{tid}] succeeded" in log or f"{tid}] raised" in log for tid in pending)

    wait_until(done, timeout, message=f"tasks {pending} to finish")
    forget_sent()


def settle(evidence: list[Evidence], worker: CeleryWorker, timeout: float = 30.0) -> list[str]:
    """Wait until the observations are committed or failed and the worker is done with
    them; their states, in order."""
    states = wait_settled([e.pk for e in evidence], timeout=timeout, worker=worker)
    wait_tasks_done(worker, timeout)
    return [states[e.pk] for e in evidence]


def heads(ns: Namespace) -> dict[str, str | None]:
    return {c.key: (c.head.value if c.head else None)
            for c in Cell.objects.filter(namespace=ns).select_related("head")}


def reload(evidence: Evidence) -> Evidence:
    return Evidence.objects.get(pk=evidence.pk)


def ops_of(evidence: Evidence) -> list[Operation]:
    # Reinstatements are the rollback's own rows, written by the revoke that caused them.
    return list(Operation.objects.filter(evidence=evidence).exclude(type="reinstate")
                .order_by("id"))


def assert_memory_consistent(ns: Namespace) -> None:
    """What must hold whatever the model did: every observation settled; at most one head per
    key; every head pointer names that head; a failed observation wrote nothing; a committed
    one wrote one operation per fact it had (all or nothing)."""
    evidence = list(Evidence.objects.filter(namespace=ns))
    unsettled = [(e.seq, e.state) for e in evidence if e.state in ("pending", "processing")]
    assert not unsettled, f"unsettled observations: {unsettled}"
    two_heads = (Version.objects.filter(namespace=ns)
                 .values("cell").annotate(n=Count("id", filter=Q(status__in=["active",
                                                                             "contested"])))
                 .filter(n__gt=1))
    assert not two_heads.exists(), f"two heads: {list(two_heads)}"
    for cell in Cell.objects.filter(namespace=ns).select_related("head"):
        live = Version.objects.filter(cell=cell, status__in=["active", "contested"])
        assert [v.pk for v in live] == ([cell.head_id] if cell.head_id else []), cell.key
    per_evidence = Counter(Operation.objects.filter(namespace=ns).exclude(type="reinstate")
                           .values_list("evidence_id", flat=True))
    for e in evidence:
        if e.state == "failed":
            assert per_evidence[e.pk] == 0, f"failed evidence {e.seq} wrote operations"
            assert e.error, f"failed evidence {e.seq} has no error"
        else:
            facts = (e.extracted or {}).get("facts", [])
            assert per_evidence[e.pk] == len(facts), (
                f"evidence {e.seq}: {per_evidence[e.pk]} operations for {len(facts)} facts")
