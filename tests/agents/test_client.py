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
        # A fact without an op is signed by the client that sent it; how it was decided is
        # the method: the client's fact as given, text by the rule extractor (SPEC §3)
        assert [(o.op, o.key, o.value, o.status, o.actor) for o in seen.operations] == [
            ("accept", "mug_1_location", "table 1", "active", "api:agent")]
        assert [(o.method, o.source) for o in seen.operations] == [("client", "")]
        from_text = memory.remember("Update: mug 1 has been moved from table 1 to shelf 2.")
        assert [(o.key, o.value, o.method) for o in from_text.operations] == [
            ("mug_1_location", "shelf 2", "rule")]


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
    from memory.models import Evidence, Operation

    ns, token = agent()
    with Client(api_url, token) as memory:
        for refused_op in (lambda: memory.retract("never_written", "oops"),
                           lambda: memory.contest("never_written", "x"),
                           lambda: memory.resolve("never_written", value="x", reason="r"),
                           lambda: memory.reject("never_written", reason="r")):
            with pytest.raises(pmem_client.NotFound) as missing:
                refused_op()
            assert "never_written" in missing.value.error
        # A key with no cell: nothing written, no observation, no noop in the log.
        assert not Evidence.objects.filter(namespace=ns).exists()
        assert not Operation.objects.filter(namespace=ns).exists()
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
            out = {"ns": memory.namespace}  # a string, as Client's (whoami on entry)
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


def test_accept_reject_and_restore_through_the_client(api_url, agent):
    ns, token = agent(client="fixer")
    with Client(api_url, token) as memory:
        memory.remember(facts=[{"key": "alice_city", "value": "Paris"}])
        accepted = memory.accept("alice_city", "Lisbon", reason="she said so",
                                 metadata={"turn": 4})
        assert (accepted.operation.op, accepted.cell.value) == ("accept", "Lisbon")
        assert accepted.cell.metadata == {"turn": 4} and accepted.cell.ordinal == 2
        rejected = memory.reject("alice_city", reason="that was her sister")
        assert (rejected.cell.value, rejected.operation.ordinal) == ("Paris", 2)
        lisbon = next(h for h in rejected.cell.history if h.value == "Lisbon")
        assert (lisbon.status, lisbon.ordinal, lisbon.metadata) == ("contradicted", 2,
                                                                   {"turn": 4})
        restored = memory.restore("alice_city", lisbon.version, reason="it was her after all")
        assert restored.observation is None and restored.operation.op == "restore"
        assert (restored.cell.value, restored.cell.metadata) == ("Lisbon", {"turn": 4})
        with pytest.raises(pmem_client.Conflict):
            memory.restore("alice_city", restored.cell.version, reason="not retracted")
        replaced = memory.reject("alice_city", "Porto", reason="moved again")
        assert replaced.cell.value == "Porto"
        assert [o.op for o in memory.operations(key="alice_city")][:2] == ["reject", "restore"]


def test_metadata_filters_and_min_score_through_the_client(api_url, agent):
    ns, token = agent()
    with Client(api_url, token) as memory:
        memory.remember(facts=[
            {"key": "alice_food", "value": "sushi", "metadata": {"user": "alice"}},
            {"key": "bob_food", "value": "pizza", "metadata": {"user": "bob"}}])
        read = memory.recall("food", filter={"user": "bob"})
        assert [(i["key"], i["metadata"]) for i in read.items] == [("bob_food", {"user": "bob"})]
        assert [c.key for c in memory.cells(filter={"user": "alice"})] == ["alice_food"]
        assert memory.get_fact("alice_food").metadata == {"user": "alice"}
        assert memory.recall("food", min_score=1.9).items == []  # above any fused score (at most 1.5)
        with pytest.raises(pmem_client.BadRequest) as bad:
            memory.remember(facts=[{"key": "x", "value": "y", "metadata": {"a": [1]}}])
        assert bad.value.field == "facts[0].metadata"


def test_an_application_token_names_the_namespace_per_client_or_per_call(api_url, db):
    from memory.models import Namespace
    from memory.services import token_create

    app = token_create(namespace_prefix="shop-", client="shop", scope="write").key
    with Client(api_url, app) as shop:
        assert shop.whoami().namespace_prefix == "shop-"
        with pytest.raises(pmem_client.PmemError, match="shop-"):
            shop.get_fact("anything")  # no namespace named: says how to name one
        shop.remember(facts=[{"key": "food", "value": "sushi"}], namespace="shop-alice")
        shop.remember(facts=[{"key": "food", "value": "pizza"}], namespace="shop-bob")
        assert shop.get_fact("food", namespace="shop-alice").value == "sushi"
        with pytest.raises(pmem_client.NotFound):
            shop.get_fact("food", namespace="other-alice")
    with Client(api_url, app, namespace="shop-bob") as bob:
        assert bob.namespace == "shop-bob" and bob.get_fact("food").value == "pizza"
        assert "sushi" not in bob.recall("food").context
    assert set(Namespace.objects.filter(name__startswith="shop-")
               .values_list("name", flat=True)) == {"shop-alice", "shop-bob"}

    async def session() -> str:
        async with AsyncClient(api_url, app, namespace="shop-alice") as alice:
            return (await alice.get_fact("food")).value + alice.namespace

    assert anyio.run(session) == "sushishop-alice"
