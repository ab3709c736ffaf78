"""What an observation costs in model calls (at most two chat calls whatever the
number of facts, one embedding batch), and soft key identity through the worker."""

from __future__ import annotations

import json

import pytest

from memory.models import Cell, KeyAlias
from memory.selectors.cells import cell_detail
from tests.support.scripted_llm import Fault
from tests.support.worker import reset_server
from tests.tasks.helpers import (
    assert_memory_consistent,
    heads,
    ops_of,
    reload,
    settle,
    submit,
    told,
)

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def _facts(n: int, round_: int) -> str:
    # Keys with no words in common (cosine far below 0.72): no identity question arises.
    return "\n".join(f"attr{j}q{n} = value {j} round {round_}" for j in range(n))


def _costs(server) -> dict[str, int]:
    counts = server.counts
    return {job: counts[job] for job in ("extraction", "annotation", "identity", "embeddings")}


@pytest.mark.parametrize("n_facts", [1, 5, 30])
def test_an_observation_costs_two_chat_calls_and_one_embedding_batch(
        llm_worker, llm_server, ns, n_facts):
    """The bound asserted, per observation: chat = 1 extraction + 1 batched annotation (+ 1
    identity call per ambiguous key: none here); embeddings = exactly 1 batch, holding the
    evidence text, each key and each `key: value` (identity and the refresh after commit
    reuse it). Both for new keys and for updates of known keys; new keys (no head) are
    creates decided without the annotator (SPEC §5.4), so round 1 costs no annotation call."""
    for round_ in (1, 2):
        reset_server(llm_server)
        [evidence] = submit(ns, told(_facts(n_facts, round_)))
        assert settle([evidence], llm_worker) == ["committed"]
        annotation = 0 if round_ == 1 else 1
        assert _costs(llm_server) == {"extraction": 1, "annotation": annotation, "identity": 0,
                                      "embeddings": 1}
        [batch] = llm_server.requests_for("embeddings")
        assert len(batch.body["input"]) == 1 + 2 * n_facts
        evidence = reload(evidence)
        assert (evidence.chat_calls, evidence.embed_calls) == (1 + annotation, 1)
        assert evidence.prompt_tokens > 0 and evidence.completion_tokens > 0
        assert len(ops_of(evidence)) == n_facts
    assert heads(ns) == {f"attr{j}q{n_facts}": f"value {j} round 2" for j in range(n_facts)}
    cell = Cell.objects.get(namespace=ns, key=f"attr0q{n_facts}")
    assert cell.embedded_text == f"attr0q{n_facts}: value 0 round 2"
    assert_memory_consistent(ns)


def test_a_rollback_costs_a_second_embedding_batch_for_the_reinstated_value(
        llm_worker, llm_server, ns):
    settle(submit(ns, told("Earlier observation: mug 1 was in table 1."),
                  told("Update: mug 1 has been moved from table 1 to drawer 2.")), llm_worker)
    reset_server(llm_server)
    [evidence] = submit(ns, told("The move of mug 1 to drawer 2 was reported in error."))
    assert settle([evidence], llm_worker) == ["committed"]
    # The reinstated head's text ("mug_1_location: table 1") was not in the observation.
    assert _costs(llm_server) == {"extraction": 1, "annotation": 1, "identity": 0,
                                  "embeddings": 2}
    assert (reload(evidence).chat_calls, reload(evidence).embed_calls) == (2, 2)
    assert Cell.objects.get(namespace=ns).embedded_text == "mug_1_location: table 1"


# --- soft key identity ---------------------------------------------------------------------------


def test_close_key_merges_when_the_model_says_same(llm_worker, llm_server, ns):
    settle(submit(ns, told("alice_home_city = Paris")), llm_worker)
    reset_server(llm_server)
    llm_server.push(Fault.CUSTOM("same"), job="identity")
    [evidence] = submit(ns, told("home_city_of_alice = Lyon"))
    assert settle([evidence], llm_worker) == ["committed"]
    assert heads(ns) == {"alice_home_city": "Lyon"}
    detail = cell_detail(namespace=ns, key="alice_home_city")
    assert detail is not None and detail.aliases == ["home_city_of_alice"]
    [op] = ops_of(evidence)
    assert (op.key, op.type, op.payload["alias_of"]) == ("alice_home_city", "accept",
                                                          "home_city_of_alice")
    [question] = llm_server.requests_for("identity")  # it saw the two key names only
    asked = question.body["messages"][-1]["content"]
    assert "home_city_of_alice" in asked and "alice_home_city" in asked
    assert "Paris" not in asked and "Lyon" not in asked
    # Cost: a third chat call for the ambiguous key; a second embedding batch for the merged
    # cell's text under its canonical name.
    assert _costs(llm_server) == {"extraction": 1, "annotation": 1, "identity": 1,
                                  "embeddings": 2}
    assert (reload(evidence).chat_calls, reload(evidence).embed_calls) == (3, 2)
    # The alias now routes without asking again.
    reset_server(llm_server)
    settle(submit(ns, told("home_city_of_alice = Nice")), llm_worker)
    assert heads(ns) == {"alice_home_city": "Nice"} and llm_server.counts["identity"] == 0
    assert_memory_consistent(ns)


def test_close_key_stays_separate_when_the_model_says_different(llm_worker, llm_server, ns):
    settle(submit(ns, told("alice_home_city = Paris")), llm_worker)
    reset_server(llm_server)
    [evidence] = submit(ns, told("home_city_of_alice = Lyon"))  # the scripted answer: different
    assert settle([evidence], llm_worker) == ["committed"]
    assert llm_server.counts["identity"] == 1
    assert heads(ns) == {"alice_home_city": "Paris", "home_city_of_alice": "Lyon"}
    assert not KeyAlias.objects.filter(namespace=ns).exists()
    assert_memory_consistent(ns)


def test_unclear_identity_answer_keeps_keys_apart(llm_worker, llm_server, ns):
    settle(submit(ns, told("alice_home_city = Paris")), llm_worker)
    llm_server.push(Fault.CUSTOM("perhaps"), job="identity")
    settle(submit(ns, told("home_city_of_alice = Lyon")), llm_worker)
    assert heads(ns) == {"alice_home_city": "Paris", "home_city_of_alice": "Lyon"}


def test_without_a_model_keys_match_exactly_after_normalisation(celery_worker_proc, ns):
    worker = celery_worker_proc(llm=None)
    first = submit(ns, "alice_home_city = Paris")
    settle(first, worker)
    later = submit(ns, "home_city_of_alice = Lyon", "Alice Home City = Nice")
    assert settle(later, worker) == ["committed", "committed"]
    assert heads(ns) == {"alice_home_city": "Nice", "home_city_of_alice": "Lyon"}
    assert all(o.method == "rule" for e in first + later for o in ops_of(e))
    assert reload(first[0]).chat_calls == 0
    assert_memory_consistent(ns)


def test_cost_benchmark_reports_calls_per_observation(transactional_db, tmp_path):
    from bench.cost import run_cost
    from tests.support.scripted_llm import ScriptedLLM

    # 8 observations over 4 key sets: the first 4 create keys (no annotation call, SPEC
    # §5.4), the last 4 update them (extraction + one annotation call each).
    server = ScriptedLLM().start()
    try:
        table = run_cost(tmp_path, n_observations=8, facts_per_observation=(1, 5), server=server)
    finally:
        server.close()
    report = json.loads((tmp_path / "cost.json").read_text())
    assert "| facts_per_observation |" in table and (tmp_path / "cost.md").exists()
    for row in report["results"]:
        assert row["committed"] == 8 and row["within_bound"] and row["server_agrees"]
        assert (row["chat_calls_max"], row["embed_calls_max"], row["identity_calls"]) == (2, 1, 0)
