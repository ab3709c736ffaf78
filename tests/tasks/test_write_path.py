"""The model-backed write path through real Celery workers: text in, cells out;
a misbehaving model never loses an observation, commits half of one, or makes two heads."""

from __future__ import annotations

import pytest

from memory.models import Cell, Evidence, Operation, Version
from memory.selectors.cells import cell_detail
from memory.services import observation_retry
from tests.support.scripted_llm import Fault
from tests.support.worker import reset_server, wait_until
from tests.tasks.helpers import (
    assert_memory_consistent,
    enqueue,
    heads,
    ops_of,
    record,
    reload,
    settle,
    submit,
    told,
    wait_tasks_done,
)

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


# --- the happy path -------------------------------------------------------------------------


def test_text_in_cells_out(llm_worker, llm_server, ns):
    [evidence] = submit(ns, told("mug_location = kitchen table\ncolor: red"))
    assert settle([evidence], llm_worker) == ["committed"]
    assert heads(ns) == {"mug_location": "kitchen table", "color": "red"}
    ops = ops_of(evidence)
    # New keys are creates, decided without the annotator (SPEC §5.4).
    assert [(o.key, o.type, o.method) for o in ops] == [
        ("mug_location", "accept", "rule"), ("color", "accept", "rule")]
    assert not any(o.raw_output for o in ops) and llm_server.counts["annotation"] == 0
    [update] = submit(ns, told("mug_location = shelf"))
    assert settle([update], llm_worker) == ["committed"]
    [op] = ops_of(update)
    assert (op.key, op.type, op.method) == ("mug_location", "accept", "model")
    assert op.raw_output  # the annotator's answer is kept on each operation it chose
    evidence = reload(evidence)
    assert evidence.embedding is not None and "vectors" not in evidence.extracted
    cell = Cell.objects.get(namespace=ns, key="color")
    assert cell.embedded_text == "color: red" and cell.key_embedding is not None
    assert_memory_consistent(ns)


def test_revision_chain_supersedes_by_arrival_order_and_withdrawal_reinstates(
        llm_worker, ns):
    chain = submit(
        ns,
        told("Earlier observation: mug 1 was in table 1."),
        told("Update: mug 1 has been moved from table 1 to drawer 2."),
        told("Update: mug 1 has been moved from drawer 2 to shelf 3."),
        told("The move of mug 1 to shelf 3 was reported in error."),
    )
    assert settle(chain, llm_worker) == ["committed"] * 4
    detail = cell_detail(namespace=ns, key="mug_1_location")
    assert detail is not None and detail.value == "drawer 2" and detail.status == "active"
    statuses = dict(Version.objects.filter(cell__namespace=ns).values_list("value", "status"))
    assert statuses == {"table 1": "superseded", "drawer 2": "active", "shelf 3": "revoked"}
    assert [o.type for o in Operation.objects.filter(namespace=ns).order_by("id")] == [
        "accept", "accept", "accept", "revoke", "reinstate"]
    assert_memory_consistent(ns)


# --- a misbehaving model ----------------------------------------------------------------------


@pytest.mark.parametrize(("fault", "times", "error"), [
    (Fault.INVALID_JSON, 1, "extraction failed: unparsable"),
    (Fault.WRONG_SCHEMA, 1, "extraction failed: wrong schema"),
    (Fault.UNKNOWN_OP, 1, "extraction failed: wrong schema"),
    (Fault.FOREIGN_KEY, 1, "extraction failed: wrong schema"),
    (Fault.EMPTY, 1, "extraction failed: unparsable: empty answer"),
    (Fault.HTTP_500, 4, "extraction failed: http 500"),
    (Fault.TIMEOUT(3.0), 4, "extraction failed: timeout"),
], ids=["invalid_json", "wrong_schema", "unknown_op", "foreign_key", "empty", "500", "timeout"])
def test_extraction_fault_fails_the_observation_visibly(llm_worker, llm_server, ns, fault,
                                                        times, error):
    llm_server.push(fault, job="extraction", times=times)
    [evidence] = submit(ns, told("mug_location = table"))
    assert settle([evidence], llm_worker, timeout=40) == ["failed"]
    evidence = reload(evidence)
    assert evidence.error.startswith(error)
    assert not Operation.objects.filter(namespace=ns).exists()
    if fault.kind not in ("http", "timeout"):  # an answer came: it is kept for the explorer
        assert evidence.extracted["extraction_error"]
        assert bool(evidence.extracted["raw"]) == (fault.kind != "empty")
    assert_memory_consistent(ns)


@pytest.mark.parametrize("fault", [Fault.HTTP_429, Fault.HTTP_500, Fault.TIMEOUT(3.0)],
                         ids=["429", "500", "timeout"])
def test_one_transient_extraction_fault_is_retried_and_commits(llm_worker, llm_server, ns,
                                                               fault):
    llm_server.push(fault, job="extraction")
    [evidence] = submit(ns, told("mug_location = table"))
    assert settle([evidence], llm_worker, timeout=40) == ["committed"]
    assert heads(ns) == {"mug_location": "table"}
    assert llm_server.counts["extraction"] == 2
    assert_memory_consistent(ns)


@pytest.mark.parametrize(("fault", "reason"), [
    (Fault.INVALID_JSON, "fallback: unparsable"),
    (Fault.WRONG_SCHEMA, "fallback: wrong schema"),
    (Fault.EMPTY, "fallback: unparsable: empty answer"),
    (Fault.UNKNOWN_OP, "invalid: unknown op 'merge'"),
], ids=["invalid_json", "wrong_schema", "empty", "unknown_op"])
def test_unusable_annotation_becomes_logged_noops_with_raw_output(llm_worker, llm_server, ns,
                                                                  fault, reason):
    submit_first = submit(ns, told("mug_location = table"))
    settle(submit_first, llm_worker)
    llm_server.push(fault, job="annotation")
    [evidence] = submit(ns, told("mug_location = drawer\ncolor = red"))
    assert settle([evidence], llm_worker) == ["committed"]
    ops = ops_of(evidence)
    # The noop on the existing key says why; 'color' has no head, so it is a create that no
    # model answer can drop (SPEC §5.4).
    assert [(o.key, o.type, o.requested) for o in ops] == [
        ("mug_location", "noop", "noop"), ("color", "accept", "accept")]
    assert ops[0].reason.startswith(reason), ops[0].reason
    if fault.kind != "empty":
        assert ops[0].raw_output
    assert heads(ns) == {"mug_location": "table", "color": "red"}  # the known key did not move
    assert_memory_consistent(ns)


def test_annotation_for_a_key_never_asked_is_dropped(llm_worker, llm_server, ns):
    settle(submit(ns, told("mug_location = chair\ncolor = blue")), llm_worker)  # heads to annotate
    llm_server.push(Fault.FOREIGN_KEY, job="annotation")
    [evidence] = submit(ns, told("mug_location = table\ncolor = red"))
    assert settle([evidence], llm_worker) == ["committed"]
    assert heads(ns) == {"mug_location": "table", "color": "red"}
    assert [o.key for o in ops_of(evidence)] == ["mug_location", "color"]
    assert not Cell.objects.filter(key="never_asked_key").exists()
    assert_memory_consistent(ns)


def test_annotation_429_then_success_commits(llm_worker, llm_server, ns):
    settle(submit(ns, told("mug_location = chair")), llm_worker)  # a head: the update is annotated
    llm_server.push(Fault.HTTP_429, job="annotation")
    [evidence] = submit(ns, told("mug_location = table"))
    assert settle([evidence], llm_worker) == ["committed"]
    assert heads(ns) == {"mug_location": "table"}
    assert llm_server.counts["annotation"] == 2
    assert_memory_consistent(ns)


@pytest.mark.parametrize(("fault", "error"), [
    (Fault.HTTP_500, "annotation failed: http 500"),
    (Fault.TIMEOUT(3.0), "annotation failed: timeout"),
], ids=["500", "timeout"])
def test_unreachable_annotator_fails_the_observation_without_a_partial_commit(
        llm_worker, llm_server, ns, fault, error):
    before = {"mug_location": "chair", "color": "blue", "size": "small"}
    settle(submit(ns, told("mug_location = chair\ncolor = blue\nsize = small")), llm_worker)
    # Every try fails until the observation has failed, however the client's and the task's
    # retries fall (an exact count of tries would depend on the machine's speed).
    llm_server.push(fault, job="annotation", times=1000)
    [evidence] = submit(ns, told("mug_location = table\ncolor = red\nsize = large"))
    assert settle([evidence], llm_worker, timeout=40) == ["failed"]
    llm_server.clear_faults()
    assert reload(evidence).error.startswith(error)
    assert heads(ns) == before and not Operation.objects.filter(evidence=evidence).exists()
    assert_memory_consistent(ns)


def test_an_annotator_outage_shorter_than_the_retries_waits_and_commits(llm_worker, llm_server,
                                                                       ns):
    settle(submit(ns, told("mug_location = chair")), llm_worker)
    llm_server.push(Fault.HTTP_500, job="annotation", times=2)  # one task attempt's worth
    [evidence] = submit(ns, told("mug_location = table"))
    assert settle([evidence], llm_worker, timeout=40) == ["committed"]
    assert heads(ns) == {"mug_location": "table"}
    assert llm_server.counts["annotation"] == 3
    assert_memory_consistent(ns)


# --- ordering, failure and retry --------------------------------------------------------------


def test_commit_follows_seq_even_when_later_extractions_finish_first(celery_worker_proc,
                                                                     llm_server, ns):
    # The first extraction is held until the later three are extracted (an order of events,
    # not a delay that a loaded machine may outrun); a worker of its own with a model timeout
    # longer than the hold, and enough processes for the three to run beside the held one.
    reset_server(llm_server)
    worker = celery_worker_proc(llm=llm_server, concurrency=4, PMEM_LLM_TIMEOUT="120")
    llm_server.push(Fault.HOLD(90), job="extraction")
    first = submit(ns, told("mug_location = place 1\nseen = 1"))
    wait_until(lambda: llm_server.counts["extraction"] >= 1, timeout=60,
               message="first extraction")
    rest = submit(ns, *[told(f"mug_location = place {i}\nseen = {i}") for i in (2, 3, 4)])

    def later_extracted_first_waiting() -> bool:
        states = dict(Evidence.objects.filter(namespace=ns).values_list("seq", "state"))
        return states[1] == "pending" and all(states[s] == "processing" for s in (2, 3, 4))

    try:
        wait_until(later_extracted_first_waiting, timeout=60,
                   message="seq 2-4 extracted while seq 1 is still extracting")
        assert not Operation.objects.filter(namespace=ns).exists()  # nothing before seq 1
    finally:
        llm_server.release()
    assert settle(first + rest, worker) == ["committed"] * 4
    seqs = list(Operation.objects.filter(namespace=ns).order_by("id").values_list("seq",
                                                                                  flat=True))
    assert seqs == sorted(seqs) == [1, 1, 2, 2, 3, 3, 4, 4]
    assert heads(ns) == {"mug_location": "place 4", "seen": "4"}
    committed = list(Evidence.objects.filter(namespace=ns).order_by("seq")
                     .values_list("committed_at", flat=True))
    assert committed == sorted(committed)
    assert_memory_consistent(ns)


def test_failed_observation_does_not_block_its_namespace_and_can_be_retried(
        llm_worker, llm_server, ns):
    settle(submit(ns, told("mug_location = chair")), llm_worker)  # a head: the update is annotated
    # Every try of both tasks (each drains, and meets the head's annotation) fails, however
    # many there are, until the first has failed.
    llm_server.push(Fault.HTTP_500, job="annotation", times=1000)
    failed, later = submit(ns, told("mug_location = table"), told("color = red"))
    assert settle([failed, later], llm_worker, timeout=40) == ["failed", "committed"]
    reset_server(llm_server)  # the faults no try needed
    assert heads(ns) == {"mug_location": "chair", "color": "red"}
    assert observation_retry(evidence=reload(failed)) is True
    assert observation_retry(evidence=reload(later)) is False  # only a failed one
    enqueue(failed)
    assert settle([failed], llm_worker) == ["committed"]
    assert heads(ns) == {"color": "red", "mug_location": "table"}
    assert reload(failed).error == ""
    assert_memory_consistent(ns)


def test_failed_extraction_can_be_retried(llm_worker, llm_server, ns):
    llm_server.push(Fault.INVALID_JSON, job="extraction")
    [evidence] = submit(ns, told("mug_location = table"))
    assert settle([evidence], llm_worker) == ["failed"]
    observation_retry(evidence=reload(evidence))
    enqueue(evidence)
    assert settle([evidence], llm_worker) == ["committed"]
    assert heads(ns) == {"mug_location": "table"}
    assert_memory_consistent(ns)


# --- duplicate delivery ---------------------------------------------------------------------------


def test_duplicate_deliveries_commit_exactly_once(llm_worker, llm_server, ns):
    llm_server.delay("extraction", 0.5)  # both deliveries are inside the task at once
    evidence = record(ns, told("mug_location = table\ncolor = red"))
    enqueue(evidence)
    enqueue(evidence)
    assert settle([evidence], llm_worker) == ["committed"]
    enqueue(evidence)  # a late redelivery after the commit
    wait_tasks_done(llm_worker)
    assert [o.type for o in ops_of(evidence)] == ["accept", "accept"]
    assert Version.objects.filter(namespace=ns).count() == 2
    # The model was asked once: the extraction is claimed, the commit checked under lock
    # (both keys are new: creates, no annotation call, SPEC §5.4).
    assert llm_server.counts["extraction"] == 1 and llm_server.counts["annotation"] == 0
    assert_memory_consistent(ns)


def test_many_observations_with_duplicates_commit_each_exactly_once(llm_worker, llm_server,
                                                                     ns):
    texts = [told(f"mug_location = place {i}\nstep = {i}") for i in range(1, 9)]
    evidence = submit(ns, *texts)
    for e in evidence[::2]:
        enqueue(e)
    assert settle(evidence, llm_worker) == ["committed"] * 8
    assert [len(ops_of(e)) for e in evidence] == [2] * 8
    assert heads(ns) == {"mug_location": "place 8", "step": "8"}
    assert llm_server.counts["annotation"] == 7  # the first observation's keys were new
    assert_memory_consistent(ns)


# --- the embedder failing ---------------------------------------------------------------------


def test_unreachable_embedder_at_extraction_is_retried_then_fails_visibly(llm_worker,
                                                                         llm_server, ns):
    llm_server.push(Fault.HTTP_500, job="embeddings", times=1000)  # until it has failed
    [evidence] = submit(ns, told("mug_location = table"))
    assert settle([evidence], llm_worker, timeout=40) == ["failed"]
    llm_server.clear_faults()
    assert reload(evidence).error.startswith("extraction failed: embedding failed: http 500")
    assert not Operation.objects.filter(namespace=ns).exists()
    # The outage over, a retry commits it.
    observation_retry(evidence=reload(evidence))
    enqueue(evidence)
    assert settle([evidence], llm_worker) == ["committed"]
    assert heads(ns) == {"mug_location": "table"}


def test_unreachable_embedder_after_commit_leaves_the_embedding_stale(llm_worker, llm_server,
                                                                      ns):
    settle(submit(ns, told("Earlier observation: mug 1 was in table 1."),
                  told("Update: mug 1 has been moved from table 1 to drawer 2.")), llm_worker)
    llm_server.delay("annotation", 1.0)
    [evidence] = submit(ns, told("The move of mug 1 to drawer 2 was reported in error."))
    wait_until(lambda: reload(evidence).state == "processing", message="extraction")
    # The rollback's refresh needs a second batch (the reinstated text): it fails.
    llm_server.push(Fault.HTTP_500, job="embeddings", times=2)
    assert settle([evidence], llm_worker) == ["committed"]
    assert heads(ns) == {"mug_1_location": "table 1"}
    cell = Cell.objects.get(namespace=ns)
    assert cell.embedded_text == "mug_1_location: drawer 2"  # stale, and says so
    assert llm_server.pending_faults() == 0
    assert_memory_consistent(ns)
