"""Soft key identity through the write path: the pairs the deterministic pre-check decides
make no model call, and the operation says the rule decided it; the rest are still asked
(SPEC §5.3, docs/identity.md)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memory.llm.client import endpoint_forms
from memory.models import Namespace, Operation
from memory.services import observation_ingest
from tests.support.scripted_llm import ScriptedLLM, scripted_llm  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db(transaction=True)

PAIRS = json.loads((Path(__file__).parents[1] / "llm" / "fixtures" /
                    "identity_pairs.json").read_text())
PREAMBLE = "They told me this."  # no rule reads it: the text goes to the model


@pytest.fixture
def model(settings: Any, scripted_llm: ScriptedLLM) -> Iterator[ScriptedLLM]:  # noqa: F811
    settings.PMEM_LLM_BASE_URL, settings.PMEM_LLM_MODEL = scripted_llm.base_url, "scripted"
    settings.PMEM_LLM_MAX_RETRIES, settings.PMEM_LLM_TIMEOUT = 0, 10.0
    settings.PMEM_MODEL_CONCURRENCY = 1
    # Every registered key passes the gate: only the pre-check keeps a pair from the model.
    settings.PMEM_IDENTITY_THRESHOLD = -1.0
    endpoint_forms.clear()
    yield scripted_llm
    endpoint_forms.clear()


def _sample(kinds: tuple[str, ...], n: int) -> list[dict[str, Any]]:
    return random.Random(41).sample([p for p in PAIRS if p["kind"] in kinds], n)


def _second_name_costs(model: ScriptedLLM, name: str, a: str, b: str) -> tuple[int, Operation]:
    ns = Namespace.objects.create(name=name)
    observation_ingest(namespace=ns, text=f"{PREAMBLE}\n{a} = first")
    before = model.counts["identity"]
    observation_ingest(namespace=ns, text=f"{PREAMBLE}\n{b} = second")
    return model.counts["identity"] - before, Operation.objects.filter(namespace=ns).latest("id")


@pytest.mark.parametrize("pair", _sample(("id_variant",), 12), ids=lambda p: p["b"][:40])
def test_an_id_variant_is_a_new_key_decided_without_the_model(model, pair):
    asked, op = _second_name_costs(model, "id-variant", pair["a"], pair["b"])

    assert asked == 0
    assert (op.type, op.method, op.value) == ("accept", "rule", "second")
    assert op.payload["identity"] == {"decided_by": "rule", "same": False,
                                      "compared_with": Operation.objects.filter(
                                          namespace=op.namespace).earliest("id").key}


@pytest.mark.parametrize("pair", _sample(("paraphrase", "same_id_paraphrase",
                                          "different_attribute"), 12),
                         ids=lambda p: p["b"][:40])
def test_a_paraphrase_or_an_undecidable_pair_is_still_asked(model, pair):
    asked, op = _second_name_costs(model, "asked", pair["a"], pair["b"])

    assert asked == 1
    assert "identity" not in op.payload


def test_the_nearest_key_told_apart_gives_way_to_the_next_one_the_model_must_see(model,
                                                                                 settings):
    """``order_8812_state`` is nearer ``order_9100_state`` (an id apart) than its own
    paraphrase ``status_of_order_8812``: the model is asked about the paraphrase."""
    settings.PMEM_IDENTITY_THRESHOLD = 0.3
    ns = Namespace.objects.create(name="passed-over")
    observation_ingest(namespace=ns, text=f"{PREAMBLE}\nstatus_of_order_8812 = packed")
    observation_ingest(namespace=ns, text=f"{PREAMBLE}\norder_9100_state = sent")
    before = len(model.requests_for("identity"))
    observation_ingest(namespace=ns, text=f"{PREAMBLE}\norder_8812_state = sent")

    [asked] = model.requests_for("identity")[before:]
    user = asked.body["messages"][-1]["content"]
    assert "status_of_order_8812" in user and "order_9100" not in user
