"""pmem_client against the live API (a real server, a real worker): every method, typed
results, paging, errors as exceptions."""

from __future__ import annotations

import subprocess
import sys

import anyio
import pytest

import pmem_client
from pmem_client import AsyncClient, Client
from tests.support.worker import CeleryWorker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def test_whoami_names_the_tokens_namespace_scope_and_client(api_url, agent):
    ns, token = agent(client="planner")
    with Client(api_url, token) as memory:
        who = memory.whoami()
        assert (who.namespace, who.scope, who.client) == (ns.name, "review", "planner")
        assert memory.namespace == ns.name


def test_remember_waits_for_the_commit_and_returns_typed_operations(api_url, agent):
    ns, token = agent()
    with Client(api_url, token) as memory:
        seen = memory.remember(facts=[{"key": "mug_1_location", "value": "table 1"}])
        assert isinstance(seen, pmem_client.Observation)
        assert seen.status == "committed" and seen.committed_at is not None
        # A fact without an op is signed by the client that sent it; the extractor that
        # placed it is the method (SPEC §3)
        assert [(o.op, o.key, o.value, o.status, o.actor) for o in seen.operations] == [
            ("accept", "mug_1_location", "table 1", "active", "api:agent")]
        assert [(o.method, o.source) for o in seen.operations] == [("rule", "")]
        from_text = memory.remember("Update: mug 1 has been moved from table 1 to shelf 2.")
        assert [(o.key, o.value) for o in from_text.operations] == [("mug_1_location",
                                                                      "shelf 2")]


def test_remember_without_wait_answers_pending_and_observation_follows_it(api_url, agent):
    ns, token = agent()
    with Client(api_url, token) as memory:
        queued = memory.remember(facts=[{"key": "door_state", "value": "open"}], wait=False)
        assert queued.status in ("pending", "processing", "committed") and queued.id
        from tests.support.worker import wait_until

        done = wait_until(lambda: (o := memory.observation(queued.id)).settled and o,
                          message="the commit")
        assert done.status == "committed" and done.operations[0].value == "open"


def test_get_fact_gives_the_cell_and_its_history_newest_first(api_url, agent):
    ns, token = agent()
    with Client(api_url, token) as memory:
        for place in ("table 1", "shelf 2", "drawer 3"):
            memory.remember(facts=[{"key": "mug_1_location", "value": place}])
        cell = memory.get_fact("mug_1_location")
        assert isinstance(cell, pmem_client.Cell)
        assert (cell.value, cell.status) == ("drawer 3", "active")
        assert [h.value for h in cell.history] == ["drawer 3", "shelf 2", "table 1"]
        assert cell.history[0].valid_to is None and cell.history[1].valid_to is not None
        page = memory.fact_history("mug_1_location", limit=50)
        assert [h.value for h in page.results] == ["drawer 3", "shelf 2", "table 1"]
        assert page.total == 3 and page.next is None
        assert [h.value for h in memory.iter_history("mug_1_location")] == [
            "drawer 3", "shelf 2", "table 1"]
        with pytest.raises(pmem_client.NotFound):
            memory.get_fact("never_written")


def test_retract_reinstates_the_previous_value_signed_by_the_client(api_url, agent):
    ns, token = agent(client="planner")
    with Client(api_url, token) as memory:
        memory.remember(facts=[{"key": "mug_1_location", "value": "table 1"}])
        memory.remember(facts=[{"key": "mug_1_location", "value": "shelf 2"}])
        undone = memory.retract("mug_1_location", "misread the camera")
        assert isinstance(undone, pmem_client.OperationResult)
        assert (undone.operation.op, undone.operation.actor) == ("revoke", "api:planner")
        assert undone.cell.value == "table 1" and undone.cell.status == "active"
        log = list(memory.operations(key="mug_1_location"))  # newest first
        assert [o.op for o in log[:2]] == ["reinstate", "revoke"]
        logged = log[1]
        assert (logged.op, logged.reason, logged.observation) == (
            "revoke", "misread the camera", undone.observation.id)


def test_an_invalid_retract_raises_conflict_with_the_reason(api_url, agent):
    ns, token = agent()
    with Client(api_url, token) as memory:
        with pytest.raises(pmem_client.Conflict) as refused:
            memory.retract("never_written", "oops")
        assert "needs a head" in refused.value.reason
        assert refused.value.observation.status == "committed"  # recorded, as a noop
        memory.remember(facts=[{"key": "lamp", "value": "on"}])
        memory.retract("lamp", "wrong")
        with pytest.raises(pmem_client.Conflict) as empty:
            memory.retract("lamp", "again")
        assert empty.value.reason
        assert memory.get_fact("lamp").status == "empty"


def test_contest_holds_two_values_open_and_resolve_settles_them(api_url, agent):
    ns, token = agent()
    with Client(api_url, token) as memory:
        memory.remember(facts=[{"key": "alice_employer", "value": "Acme"}])
        held = memory.contest("alice_employer", "Globex", reason="a second report")
        assert held.cell.status == "contested"
        assert {held.cell.value, *[a.value for a in held.cell.alternatives]} == {"Acme", "Globex"}
        settled = memory.resolve("alice_employer", value="Globex", reason="HR confirmed")
        assert (settled.cell.status, settled.cell.value) == ("active", "Globex")
        with pytest.raises(pmem_client.Conflict):
            memory.resolve("alice_employer", value="Acme", reason="not contested any more")


def test_recall_reads_the_current_values(api_url, agent):
    ns, token = agent()
    with Client(api_url, token) as memory:
        memory.remember(facts=[{"key": "mug_1_location", "value": "table 1"}])
        memory.remember(facts=[{"key": "mug_1_location", "value": "shelf 2"}])
        read = memory.recall("where is mug 1?")
        assert isinstance(read, pmem_client.ReadResult) and read.mode == "frontier"
        assert "shelf 2" in read.context and "table 1" not in read.context
        raw = memory.recall("where is mug 1?", mode="raw", k=5)
        assert "table 1" in raw.context


def test_operations_and_cells_are_iterated_across_pages(api_url, agent):
    ns, token = agent()
    with Client(api_url, token) as memory:
        memory.remember(facts=[{"key": f"item_{i}", "value": f"v{i}"} for i in range(5)])
        ops = list(memory.operations(page_size=2))
        assert sorted(o.key for o in ops) == [f"item_{i}" for i in range(5)]
        assert all(isinstance(o, pmem_client.Operation) for o in ops)
        assert [o.id for o in ops] == sorted((o.id for o in ops), reverse=True)
        cells = list(memory.cells(page_size=2))
        assert [c.key for c in cells] == [f"item_{i}" for i in range(5)]
        assert [o.key for o in memory.operations(key="item_3")] == ["item_3"]


def test_erase_removes_the_key(api_url, agent):
    ns, token = agent()
    with Client(api_url, token) as memory:
        memory.remember(facts=[{"key": "alice_phone", "value": "555-0101"}])
        memory.erase("alice_phone")
        with pytest.raises(pmem_client.NotFound):
            memory.get_fact("alice_phone")
        with pytest.raises(pmem_client.NotFound):
            memory.erase("alice_phone")


def test_errors_are_one_exception_each_and_name_the_field(api_url, agent):
    ns, token = agent()
    with Client(api_url, token) as memory:
        with pytest.raises(pmem_client.BadRequest) as bad:
            memory.remember(facts=[{"key": "mug", "value": "x", "op": "teleport"}])
        assert bad.value.field == "facts[0].op" and bad.value.status == 400
        with pytest.raises(pmem_client.BadRequest) as empty:
            memory.remember(text="   ")
        assert empty.value.field == "text"
    with Client(api_url, "not-a-token") as stranger, pytest.raises(pmem_client.Unauthorized):
        stranger.whoami()
    with Client(api_url, token, namespace="someone-else") as lost, \
            pytest.raises(pmem_client.NotFound):
        lost.get_fact("mug")
    with Client(api_url, token, channel="carrier-pigeon") as odd, \
            pytest.raises(pmem_client.BadRequest) as channel:
        odd.remember(facts=[{"key": "mug", "value": "x"}])
    assert channel.value.field == "X-Pmem-Channel"


def test_a_reused_key_replays_the_same_request_and_refuses_another(api_url, agent):
    ns, token = agent()
    fact = [{"key": "door_state", "value": "open"}]
    with Client(api_url, token) as memory:
        first = memory.remember(facts=fact, idempotency_key="door-1")
        assert first.replayed is False and first.status == "committed"
        again = memory.remember(facts=fact, idempotency_key="door-1")  # waits: wait=1, polls
        assert (again.id, again.replayed, again.status) == (first.id, True, "committed")
        queued = memory.remember(facts=fact, idempotency_key="door-1", wait=False)
        assert (queued.id, queued.replayed) == (first.id, True)
        with pytest.raises(pmem_client.IdempotencyConflict) as conflict:
            memory.remember(facts=[{"key": "door_state", "value": "shut"}],
                            idempotency_key="door-1")
        assert conflict.value.observation_id == first.id and conflict.value.status == 409
        assert memory.get_fact("door_state").value == "open"


def test_a_bound_token_claims_its_source_and_no_other_trusted_one(api_url, agent):
    from memory.services import token_create, trust_set

    ns, _ = agent()
    trust_set(namespace=ns, source="hr", level=9, actor="cli")
    trust_set(namespace=ns, source="rumor", level=1, actor="cli")
    bound = token_create(namespace=ns, client="hr-bot", scope="write", sources=["hr"]).key
    loose = token_create(namespace=ns, client="gossip", scope="write").key
    with Client(api_url, bound) as hr, Client(api_url, loose) as gossip:
        assert hr.whoami().sources == ("hr",)
        seen = hr.remember(facts=[{"key": "salary", "value": "120k"}])  # names no source
        assert [o.source for o in seen.operations] == ["hr"]
        for source in ("hr", "rumor"):
            with pytest.raises(pmem_client.Forbidden) as refused:
                gossip.remember(facts=[{"key": "salary", "value": "555k"}], source=source)
            assert refused.value.status == 403 and source in refused.value.error
        gossip.remember(facts=[{"key": "salary", "value": "555k"}], source="hallway")
        assert hr.get_fact("salary").value == "120k"  # untrusted: a contest, not the head


def test_async_client_does_the_same(api_url, agent, worker: CeleryWorker):
    ns, token = agent(client="async")

    async def session() -> dict:
        async with AsyncClient(api_url, token) as memory:
            out = {"ns": await memory.namespace()}
            await memory.remember(facts=[{"key": "oven", "value": "off"}])
            await memory.remember(facts=[{"key": "oven", "value": "on"}])
            out["recall"] = (await memory.recall("is the oven on?")).context
            undone = await memory.retract("oven", "it was never turned on")
            out["after"] = undone.cell.value
            out["log"] = [(o.op, o.actor)
                          async for o in memory.operations(key="oven", page_size=1)]
            out["cells"] = [c.key async for c in memory.cells()]
            out["history"] = [h.value async for h in memory.iter_history("oven")]
            try:
                await memory.get_fact("nothing")
            except pmem_client.NotFound:
                out["missing"] = True
            return out

    out = anyio.run(session)
    assert out["ns"] == ns.name and "on" in out["recall"]
    assert out["after"] == "off" and out["missing"]
    assert out["log"] == [("reinstate", "api:async"), ("revoke", "api:async"),
                          ("accept", "api:async"), ("accept", "api:async")]
    assert out["cells"] == ["oven"] and out["history"][-1] == "off"


def test_pmem_client_imports_no_django():
    code = ("import sys, pmem_client; "
            "sys.exit(any(m == 'django' or m.startswith('django.') for m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
