"""An update of a key that an earlier observation, planned but not committed yet, writes is
shown that plan's value as the key's head at extraction, so the model's proposal stands and
no annotation call is made (SPEC §5.5; memory/services/shown.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from memory.domain.render import key_text
from memory.llm.client import endpoint_forms
from memory.llm.embedding import embed_batch
from memory.models import Cell, Evidence, Namespace, Operation
from memory.services import (
    namespace_drain,
    observation_extract,
    observation_record,
    observations_ingest,
)
from tests.support.scripted_llm import ScriptedLLM, scripted_llm  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db(transaction=True)

PREAMBLE = "They told me this."  # no rule reads it: the text goes to the model


@pytest.fixture
def model(settings: Any, scripted_llm: ScriptedLLM) -> Iterator[ScriptedLLM]:  # noqa: F811
    settings.PMEM_LLM_BASE_URL, settings.PMEM_LLM_MODEL = scripted_llm.base_url, "scripted"
    settings.PMEM_LLM_MAX_RETRIES, settings.PMEM_LLM_TIMEOUT = 0, 10.0
    scripted_llm.patches = True  # extraction answers each fact as a patch on its head
    endpoint_forms.clear()
    yield scripted_llm
    endpoint_forms.clear()


def _told(ns: Namespace, *texts: str) -> None:
    """Record the texts, then drain them, planned ahead."""
    observations_ingest(namespace=ns, observations=[{"text": f"{PREAMBLE}\n{t}"} for t in texts])


def _ops(ns: Namespace) -> list[tuple[str, str, str, str]]:
    return list(Operation.objects.filter(namespace=ns).order_by("seq", "id")
                .values_list("key", "type", "value", "method"))


def test_an_update_behind_the_plan_that_creates_its_key_costs_no_annotation(model, settings):
    settings.PMEM_MODEL_CONCURRENCY = 8
    model.delay("extraction", 0.2)  # in flight together, were nothing held back
    ns = Namespace.objects.create(name="created-ahead")
    _told(ns, "k3f2a9c01b7e = shelf 1", "k77aa01b2c3d = shelf 2", "k3f2a9c01b7e = shelf 3")

    assert _ops(ns) == [("k3f2a9c01b7e", "accept", "shelf 1", "rule"),
                        ("k77aa01b2c3d", "accept", "shelf 2", "rule"),
                        ("k3f2a9c01b7e", "accept", "shelf 3", "model")]
    assert model.counts["annotation"] == 0
    update = [r for r in model.requests_for("extraction") if "shelf 3" in
              r.body["messages"][-1]["content"]][0]
    assert "shelf 1" in update.body["messages"][-1]["content"]  # the planned head, shown


def test_an_update_behind_an_earlier_update_is_shown_the_value_that_one_plans(model, settings):
    settings.PMEM_MODEL_CONCURRENCY = 8
    ns = Namespace.objects.create(name="updated-ahead")
    _told(ns, "order_8812_status = packed")
    model.delay("extraction", 0.2)
    _told(ns, "order_8812_status = sent", "order_8812_status = delivered")

    assert _ops(ns)[1:] == [("order_8812_status", "accept", "sent", "model"),
                            ("order_8812_status", "accept", "delivered", "model")]
    assert model.counts["annotation"] == 0


def test_extracted_away_from_its_drain_it_is_shown_the_earlier_facts_or_waits_for_them(settings):
    from memory.services.ingest import observations_record
    from memory.services.shown import elsewhere

    settings.PMEM_EXTRACTION_HEADS = 8
    ns = Namespace.objects.create(name="elsewhere")
    first, other, update = observations_record(namespace=ns, observations=[
        {"text": f"{PREAMBLE}\nk3f2a9c01b7e = shelf 1"},
        {"text": f"{PREAMBLE}\nk77aa01b2c3d = shelf 2"},
        {"text": f"{PREAMBLE}\nk3f2a9c01b7e = shelf 3"}])

    assert elsewhere(update.pk, 8) is None  # the earlier one naming its key: not extracted
    type(first).objects.filter(pk=first.pk).update(extracted={"facts": [
        {"key": "k3f2a9c01b7e", "value": "shelf 1", "assertion": "asserted"}]})
    [(earlier, items)] = elsewhere(update.pk, 8)
    assert earlier.pk == first.pk
    assert [(i.key, i.op, i.value) for i, _ in items] == [("k3f2a9c01b7e", "accept", "shelf 1")]
    assert elsewhere(other.pk, 8) == []  # nothing before it names its key


def test_a_key_set_once_and_updated_twice_among_ten_is_shown_each_earlier_value(model, settings):
    # Three observations of ten hold the key's id: more than a quarter of a short line, yet
    # the id names the key each time (a word without a digit held as often would not).
    settings.PMEM_MODEL_CONCURRENCY = 8
    model.delay("extraction", 0.2)
    ns = Namespace.objects.create(name="twice-updated")
    others = [f"k{n:011x} = shelf {n}" for n in range(7)]
    _told(ns, "k3f2a9c01b7e = shelf 10", *others[:3], "k3f2a9c01b7e = shelf 11", *others[3:6],
          "k3f2a9c01b7e = shelf 12", others[6])

    updates = [op for op in _ops(ns) if op[0] == "k3f2a9c01b7e"]
    assert updates == [("k3f2a9c01b7e", "accept", "shelf 10", "rule"),
                       ("k3f2a9c01b7e", "accept", "shelf 11", "model"),
                       ("k3f2a9c01b7e", "accept", "shelf 12", "model")]
    assert model.counts["annotation"] == 0
    last = [r for r in model.requests_for("extraction") if "shelf 12" in
            r.body["messages"][-1]["content"]][0]
    assert "shelf 11" in last.body["messages"][-1]["content"]


def test_the_observation_a_later_one_waits_for_is_extracted_first(model, settings):
    # The whole line is in view: the fifth observation, which the sixth waits for, is not
    # left to be extracted after the four before it while the sixth waits on it.
    settings.PMEM_MODEL_CONCURRENCY = 2
    model.delay("extraction", 0.2)
    ns = Namespace.objects.create(name="awaited-first")
    _told(ns, *[f"k{n:011x} = shelf {n}" for n in range(4)], "kaa11bb22cc3 = shelf 4",
          "kaa11bb22cc3 = shelf 5")

    asked = [r.body["messages"][-1]["content"] for r in model.requests_for("extraction")]
    first = next(i for i, text in enumerate(asked) if "shelf 4" in text)
    assert first < 3, f"the awaited observation was asked for {first + 1}th: {asked}"
    assert model.counts["annotation"] == 0


def test_with_the_semantic_embedder_extraction_embeds_the_keys_the_plan_compares(model,
                                                                                 settings):
    # The plan's soft identity compares each new key with the registered ones: their vectors
    # are made on the extraction's thread, so the head's plan does not wait on MiniLM.
    settings.PMEM_EMBEDDER = "minilm"
    ns = Namespace.objects.create(name="keys-at-extraction")
    recorded = observation_record(namespace=ns, text=f"{PREAMBLE}\nmug_1_location = shelf 4")
    observation_extract(evidence_id=recorded.evidence.pk)

    extracted = Evidence.objects.get(pk=recorded.evidence.pk).extracted
    assert set(extracted["vectors"]) == {key_text("mug_1_location")}
    namespace_drain(namespace_id=ns.pk)

    evidence = Evidence.objects.get(pk=recorded.evidence.pk)
    assert evidence.state == Evidence.State.COMMITTED
    cell = Cell.objects.get(namespace=ns, key="mug_1_location")
    expected = embed_batch([key_text("mug_1_location")])[0][0]
    assert max(abs(a - b) for a, b in zip(cell.key_embedding, expected, strict=True)) < 1e-5
