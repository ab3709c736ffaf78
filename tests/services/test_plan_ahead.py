"""Planning ahead, in parallel, gives what planning in seq order gives (SPEC §5.5).

Random streams — updates, repeats, hedged reports (contests), retractions, a client's
structured facts and explicit operations, keys the model names differently (soft identity),
several observations on one key back to back, one key twice in one observation — go through
a deterministic scripted model twice: one observation at a time, each extracted and planned
after the previous one committed (``PMEM_MODEL_CONCURRENCY=1``), and all recorded first, then
drained with eight extracted and planned ahead on threads. The graphs must match operation
for operation. ``PMEM_DIFF_STREAMS`` sets how many streams (the issue's figure: 500).
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings

from memory import metrics
from memory.llm.client import endpoint_forms
from memory.models import Evidence, KeyAlias, Namespace, Operation, Version
from memory.services import observation_ingest, observations_ingest
from tests.support.scripted_llm import Fault, ScriptedLLM, scripted_llm  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db(transaction=True)

STREAMS = int(os.environ.get("PMEM_DIFF_STREAMS", "40"))
KEYS = ("alice_city", "alice_job", "bob_city", "mug_1_location", "alice_home_city")
#: Names the model may use for an existing key: the same words in another order.
ALIASES = {"alice_city": "city_alice", "bob_city": "city_bob", "alice_job": "job_alice"}
VALUES = ("Lisbon", "Porto", "Paris", "Oslo", "Rome")
PREAMBLE = "They told me this."  # no rule reads it: the text goes to the model


@pytest.fixture
def model(settings: Any, scripted_llm: ScriptedLLM) -> Iterator[ScriptedLLM]:  # noqa: F811
    settings.PMEM_LLM_BASE_URL, settings.PMEM_LLM_MODEL = scripted_llm.base_url, "scripted"
    settings.PMEM_LLM_MAX_RETRIES, settings.PMEM_LLM_TIMEOUT = 0, 10.0
    settings.PMEM_IDENTITY_THRESHOLD = 0.72
    scripted_llm.patches = True
    endpoint_forms.clear()
    yield scripted_llm
    endpoint_forms.clear()


def _line(rng: random.Random, said: dict[str, list[str]]) -> str:
    key = rng.choice(KEYS)
    roll = rng.random()
    if roll < 0.15 and said.get(key):
        return f"Withdrawn: {key} = {rng.choice(said[key])}"
    value = rng.choice(VALUES)
    said.setdefault(key, []).append(value)
    name = ALIASES.get(key, key) if rng.random() < 0.15 else key
    return f"Maybe: {name} = {value}" if roll > 0.8 else f"{name} = {value}"


def _observation(rng: random.Random, said: dict[str, list[str]]) -> dict[str, Any]:
    roll = rng.random()
    if roll < 0.15:  # a client's structured facts, decided without the model
        key, value = rng.choice(KEYS), rng.choice(VALUES)
        fact: dict[str, Any] = {"key": key, "value": value}
        if rng.random() < 0.4:
            fact["op"] = rng.choice(("contest", "resolve", "reject"))
        said.setdefault(key, []).append(value)
        return {"facts": [fact]}
    lines = [_line(rng, said) for _ in range(rng.choice((1, 1, 2, 3)))]
    return {"text": "\n".join([PREAMBLE, *lines])}


def stream(seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    said: dict[str, list[str]] = {}
    return [_observation(rng, said) for _ in range(rng.randint(4, 12))]


def _told(ns: Namespace, *texts: str) -> None:
    """Record the texts (each after a line no rule reads), then drain them, planned ahead."""
    observations_ingest(namespace=ns, observations=[{"text": f"{PREAMBLE}\n{t}"} for t in texts])


def graph(ns: Namespace) -> dict[str, Any]:
    """Everything the two runs must agree on: each operation in order, each version, each
    alias, each observation's end state."""
    ops = [(o.seq, o.key, o.type, o.value, o.method, o.version.status if o.version else None)
           for o in Operation.objects.filter(namespace=ns).select_related("version")
           .order_by("seq", "id")]
    versions = sorted((v.cell.key, v.value, v.status, v.supersedes.value if v.supersedes else "")
                      for v in Version.objects.filter(cell__namespace=ns)
                      .select_related("cell", "supersedes"))
    aliases = sorted(KeyAlias.objects.filter(namespace=ns).values_list("alias", "cell__key"))
    states = list(Evidence.objects.filter(namespace=ns).order_by("seq")
                  .values_list("seq", "state"))
    return {"ops": ops, "versions": versions, "aliases": aliases, "states": states}


def test_planning_ahead_on_threads_gives_the_graph_serial_planning_gives(model, settings):
    differ = []
    planned_ahead = 0
    on_earlier = metrics.PLANS_ON_EARLIER._value.get()
    for seed in range(STREAMS):
        observations = stream(seed)
        # override_settings, not the fixture: the fixture nests one level per assignment,
        # and hundreds of streams would run Django's settings lookup out of stack.
        model.delay("extraction", 0)
        serial = Namespace.objects.create(name=f"serial-{seed}")
        with override_settings(PMEM_MODEL_CONCURRENCY=1):
            for item in observations:
                observation_ingest(namespace=serial, **item)
        model.delay("extraction", 0.05)  # the calls overlap for certain: in flight together
        ahead = Namespace.objects.create(name=f"ahead-{seed}")
        with override_settings(PMEM_MODEL_CONCURRENCY=8):
            observations_ingest(namespace=ahead, observations=observations)
        planned_ahead += len(observations)
        if graph(serial) != graph(ahead):
            differ.append(seed)
    assert not differ, f"streams whose graphs differ (seeds): {differ[:10]}"
    assert model.max_in_flight > 1, "nothing was planned ahead: no two calls were ever in flight"
    assert planned_ahead >= STREAMS * 4
    assert metrics.PLANS_ON_EARLIER._value.get() - on_earlier >= STREAMS // 4, (
        "no plan was made on an earlier observation's plan")


def test_a_plan_made_stale_by_an_earlier_commit_is_made_again(model, settings):
    """Values retracted right after they arrive, under another name of the key, all
    extracted at once: when its plan was made, each retraction named a value memory did not
    hold yet (a noop); at its turn the basis has changed, so it is planned again and revokes
    the value, as planning in seq order would."""
    settings.PMEM_MODEL_CONCURRENCY = 8
    # No heads shown to extraction: nothing holds an extraction back behind the plan of an
    # earlier observation naming its words, so every extraction overlaps for certain.
    settings.PMEM_EXTRACTION_HEADS = 0
    model.delay("extraction", 0.2)  # the extractions overlap for certain
    ns = Namespace.objects.create(name="one-key")
    observation_ingest(namespace=ns, text=f"{PREAMBLE}\nalice_home_city = Lisbon")
    # Each update waits on its annotation, so the retraction behind it is planned before it
    # commits, however slow the machine (planned after it, there is nothing to redo).
    model.delay("annotation", 0.6)
    redone = metrics.PLANS_REDONE._value.get()
    _told(ns, "alice_home_city = Porto", "Withdrawn: city_alice_home = Porto",
          "alice_home_city = Paris", "Withdrawn: home_city_alice = Paris")
    ops = list(Operation.objects.filter(namespace=ns).exclude(type="reinstate")
               .order_by("seq", "id").values_list("type", "value"))
    assert ops == [("accept", "Lisbon"), ("accept", "Porto"), ("revoke", "Porto"),
                   ("accept", "Paris"), ("revoke", "Paris")]
    head = Version.objects.get(cell__namespace=ns, status="active")
    assert head.value == "Lisbon"
    assert model.max_in_flight > 1
    assert metrics.PLANS_REDONE._value.get() - redone >= 2


def test_an_update_is_planned_on_the_plan_of_the_observation_before_it(model, settings):
    """Observations updating a key that the observation just before them creates, behind a
    head of the line that takes a while to annotate: each is annotated on what the earlier
    plan leaves (a head not committed yet), on a thread, beside the head's annotation,
    rather than at its turn; at its turn the head is what it read, so its plan stands."""
    settings.PMEM_MODEL_CONCURRENCY = 8
    model.patches = False  # extraction proposes nothing: every update is annotated
    ns = Namespace.objects.create(name="chain")
    observation_ingest(namespace=ns, text=f"{PREAMBLE}\ncarol_city = Oslo")
    model.delay("extraction", 0.2)
    model.delay("annotation", 0.5)
    model.gather("annotation", 3)  # however long a busy machine takes to send the third
    on_earlier = metrics.PLANS_ON_EARLIER._value.get()
    redone = metrics.PLANS_REDONE._value.get()
    _told(ns, "carol_city = Rome", "alice_city = Lisbon", "alice_city = Porto",
          "bob_city = Oslo", "Maybe: bob_city = Rome")
    ops = list(Operation.objects.filter(namespace=ns).order_by("seq", "id")
               .values_list("key", "type", "value", "method"))
    assert ops == [("carol_city", "accept", "Oslo", "rule"),
                   ("carol_city", "accept", "Rome", "model"),
                   ("alice_city", "accept", "Lisbon", "rule"),
                   ("alice_city", "accept", "Porto", "model"),
                   ("bob_city", "accept", "Oslo", "rule"),
                   ("bob_city", "contest", "Rome", "model")]
    assert metrics.PLANS_ON_EARLIER._value.get() - on_earlier == 2
    assert metrics.PLANS_REDONE._value.get() == redone
    # Planned at their turns, the three annotations would have been made one at a time.
    assert model.max_in_flight_of("annotation") == 3


def test_a_value_contested_and_withdrawn_in_one_observation_behind_an_earlier_plan(model,
                                                                                    settings):
    """An observation naming a key an earlier one (not committed yet) writes, and another key
    twice — hedged, then withdrawn: its second round revokes the version its first round
    adds, which it names by the id a dry run gave it. Planned on the earlier plan, that id
    would not be the one the commit gives (the earlier plan's versions took ids before it),
    so it is planned at its turn, and revokes what it contested."""
    settings.PMEM_MODEL_CONCURRENCY = 8
    model.patches = False
    ns = Namespace.objects.create(name="two-rounds")
    _told(ns, "carol_city = Oslo", "bob_city = Oslo")
    model.delay("extraction", 0.2)
    model.delay("annotation", 0.5)
    _told(ns, "carol_city = Rome", "alice_city = Lisbon\nmug_1_location = Oslo",
          "mug_1_location = Rome\nMaybe: bob_city = Paris\nWithdrawn: bob_city = Paris")
    ops = list(Operation.objects.filter(namespace=ns, seq__gte=3).exclude(type="reinstate")
               .order_by("seq", "id").values_list("key", "type", "value"))
    assert ops == [("carol_city", "accept", "Rome"), ("alice_city", "accept", "Lisbon"),
                   ("mug_1_location", "accept", "Oslo"), ("mug_1_location", "accept", "Rome"),
                   ("bob_city", "contest", "Paris"), ("bob_city", "revoke", "Paris")]
    assert Version.objects.get(cell__namespace=ns, cell__key="bob_city", value="Paris").status \
        == "revoked"


def test_a_key_named_as_an_earlier_observation_names_it_is_planned_at_its_turn(model,
                                                                               settings):
    """Two observations name ``city_alice``, which soft identity will make an alias of
    ``alice_city``, behind a head held on its annotation. The first is planned ahead (its
    identity call says same); the second cannot be planned on that plan (it writes the key
    under the other name, the alias the first will register), so it waits for its turn and,
    the alias registered, asks identity nothing: one identity call, not two."""
    settings.PMEM_MODEL_CONCURRENCY = 8
    model.patches = False
    ns = Namespace.objects.create(name="alias-ahead")
    _told(ns, "carol_city = Oslo", "alice_city = Rome")
    model.delay("extraction", 0.2)
    model.push(Fault.HOLD(3.0), job="annotation")  # the head's annotation: the first one
    before = model.counts["identity"]
    _told(ns, "carol_city = Lisbon", "city_alice = Porto", "city_alice = Paris")
    ops = list(Operation.objects.filter(namespace=ns, seq__gte=3).order_by("seq", "id")
               .values_list("key", "type", "value", "method"))
    assert ops == [("carol_city", "accept", "Lisbon", "model"),
                   ("alice_city", "accept", "Porto", "identity"),
                   ("alice_city", "accept", "Paris", "model")]
    assert model.counts["identity"] - before == 1


def test_a_value_withdrawn_under_another_name_behind_an_earlier_plan_is_revoked(model,
                                                                                settings):
    """An observation updates a key an earlier one (not committed yet) updates, then
    withdraws the value under another name of the key. Soft identity moves the withdrawal
    onto the key: two facts on a cell the earlier plan writes, the second naming the version
    the first adds. Planned on the earlier plan, the dry run would give that version an id
    the commit does not; it is planned on the committed state instead, and again at the
    commit, and revokes the value, as planning in seq order does."""
    settings.PMEM_MODEL_CONCURRENCY = 8
    model.patches = False
    ns = Namespace.objects.create(name="withdrawn-by-alias-ahead")
    _told(ns, "carol_city = Oslo", "bob_city = Oslo")
    model.delay("extraction", 0.2)
    model.push(Fault.HOLD(3.0), job="annotation")  # the head's: the rest are planned behind
    # The earlier update is a client's fact: planned without the model, its plan is there
    # before the later observation's extraction answers, so that one is planned on it.
    observations_ingest(namespace=ns, observations=[
        {"text": f"{PREAMBLE}\ncarol_city = Lisbon"},
        {"facts": [{"key": "bob_city", "value": "Porto"}]},
        {"text": f"{PREAMBLE}\nbob_city = Lisbon\nWithdrawn: city_bob = Lisbon"}])
    ops = list(Operation.objects.filter(namespace=ns, seq__gte=3).order_by("seq", "id")
               .values_list("key", "type", "value", "method"))
    assert ops == [("carol_city", "accept", "Lisbon", "model"),
                   ("bob_city", "accept", "Porto", "client"),
                   ("bob_city", "accept", "Lisbon", "model"),
                   ("bob_city", "revoke", "Lisbon", "identity"),
                   ("bob_city", "reinstate", None, "reinstate")]
    assert Version.objects.get(cell__namespace=ns, cell__key="bob_city",
                               status="active").value == "Porto"


def test_a_value_withdrawn_under_an_alias_of_its_key_is_revoked(model, settings):
    """Once soft identity made ``city_alice_home`` an alias of ``alice_home_city``, a fact
    under the alias is a fact of that key — a withdrawal too."""
    settings.PMEM_MODEL_CONCURRENCY = 1
    ns = Namespace.objects.create(name="alias")
    for line in ("alice_home_city = Lisbon", "city_alice_home = Porto",
                 "Withdrawn: city_alice_home = Porto"):
        observation_ingest(namespace=ns, text=f"{PREAMBLE}\n{line}")
    assert list(KeyAlias.objects.filter(namespace=ns).values_list("alias", flat=True)) == [
        "city_alice_home"]
    ops = list(Operation.objects.filter(namespace=ns).exclude(type="reinstate")
               .order_by("seq", "id").values_list("type", "value"))
    assert ops == [("accept", "Lisbon"), ("accept", "Porto"), ("revoke", "Porto")]
    assert Version.objects.get(cell__namespace=ns, status="active").value == "Lisbon"
