"""The frontier read's hybrid ranking (SPEC §7), the default semantic embedder behind it, and
switching embedders safely (CONTRACT "Embedders")."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from django.core.management import call_command

from memory.llm.embedding import embedder_from_settings, embedder_id
from memory.models import Cell, Evidence, Namespace
from memory.reads import read
from memory.services import EmbedderMismatch, observations_ingest
from memory.services.reembed import namespace_reembed

pytestmark = pytest.mark.django_db

PLACES = ["kitchen drawer", "garden shed", "desk", "top shelf", "sofa", "fridge", "garage box"]
PROFILE = [("user_favorite_food", "sushi"), ("user_pet", "a cat named Miso"),
           ("user_employer", "Acme Robotics"), ("user_sister_name", "Ingrid")]
DISTRACTORS = [("office_printer_status", "out of toner"), ("meeting_room_b", "booked Tuesday"),
               ("server_region", "eu-west"), ("invoice_42_total", "310 euros"),
               ("train_ticket_seat", "coach 5 seat 61"), ("deploy_window", "Friday night")]


def rings(ns, n: int = 40) -> None:
    observations_ingest(namespace=ns, observations=[
        {"facts": [{"key": f"ring_{i}_location", "value": PLACES[(i * move) % len(PLACES)]}]}
        for move in (1, 2, 3) for i in range(n)])


def facts(ns, pairs) -> None:
    observations_ingest(namespace=ns, observations=[{"facts": [{"key": k, "value": v}]}
                                                    for k, v in pairs])


@pytest.mark.parametrize("embedder", ["hashing", "minilm"])
def test_the_exact_entity_comes_first_among_look_alikes(make_namespace, settings, embedder):
    settings.PMEM_EMBEDDER = embedder
    ns = make_namespace()
    rings(ns)

    for i in (7, 17, 33):
        items = read("frontier", namespace=ns, query=f"Where is ring {i}?", k=5).items
        assert items[0]["key"] == f"ring_{i}_location"
        assert items[0]["value"] == PLACES[(i * 3) % len(PLACES)]  # the current one
        assert items[0]["lexical_score"] > items[1]["lexical_score"]
        assert items[0]["score"] >= items[1]["score"]


def test_each_item_carries_its_score_and_the_parts_it_was_fused_from(ns):
    rings(ns, 5)

    item = read("frontier", namespace=ns, query="ring 3", k=3).items[0]

    assert item["key"] == "ring_3_location"
    assert item["score"] == pytest.approx(item["semantic_score"] + 0.5 * item["lexical_score"],
                                          abs=1e-3)
    assert 0 < item["lexical_score"] <= 1


def test_a_question_sharing_no_word_finds_the_fact_by_meaning(make_namespace, settings):
    settings.PMEM_EMBEDDER = "minilm"
    ns = make_namespace()
    facts(ns, PROFILE + DISTRACTORS)

    for question, key in (("What do I like to eat?", "user_favorite_food"),
                          ("Which animal lives with me?", "user_pet"),
                          ("Where do I work?", "user_employer")):
        top = [i["key"] for i in read("frontier", namespace=ns, query=question, k=3).items]
        assert key in top, (question, top)


def test_the_papers_cosine_ranking_stays_a_read_mode(ns):
    rings(ns, 10)

    cosine = read("frontier_cosine", namespace=ns, query="Where is ring 7?", k=5)

    assert cosine.mode == "frontier_cosine"
    assert all(set(i) >= {"score", "key", "line"} and "lexical_score" not in i
               for i in cosine.items)
    scores = [i["score"] for i in cosine.items]
    assert scores == sorted(scores, reverse=True)


def test_the_default_embedder_embeds_cells_and_observations_after_the_commit(make_namespace,
                                                                          settings):
    settings.PMEM_EMBEDDER = "minilm"
    ns = make_namespace()
    facts(ns, PROFILE)

    cell = Cell.objects.get(namespace=ns, key="user_pet")
    assert not cell.embed_pending and cell.embedded_text == "user_pet: a cat named Miso"
    want = embedder_from_settings().embed(["user_pet: a cat named Miso"])[0]
    assert np.allclose(np.array(cell.embedding), want, atol=1e-5)
    assert not Evidence.objects.filter(namespace=ns, embedding__isnull=True).exists()
    assert cell.terms == [f"{ns.pk}:user", f"{ns.pk}:pet", f"{ns.pk}:a", f"{ns.pk}:cat",
                          f"{ns.pk}:named", f"{ns.pk}:miso"]


def test_a_read_with_another_embedder_is_refused_until_re_embedded(ns, settings, client_for):
    facts(ns, PROFILE)  # hashing vectors
    settings.PMEM_EMBEDDER = "minilm"
    api = client_for(ns)

    refused = api.post(f"/api/v1/namespaces/{ns.name}/read/",
                       json.dumps({"query": "What do I like to eat?"}),
                       content_type="application/json")
    assert refused.status_code == 409
    body = refused.json()
    assert body["field"] == "namespace" and "pmem_reembed" in body["error"]
    assert body["embedder"] == "hashing/384" and body["configured"] == "all-MiniLM-L6-v2/384"
    for mode in ("frontier_cosine", "raw"):
        with pytest.raises(EmbedderMismatch):
            read(mode, namespace=Namespace.objects.get(pk=ns.pk), query="food")

    out = io.StringIO()
    call_command("pmem_reembed", ns.name, stdout=out)

    assert "8 rows re-embedded (hashing/384 -> all-MiniLM-L6-v2/384)" in out.getvalue()
    ns.refresh_from_db()
    assert ns.embedder == embedder_id() and ns.reembed is None
    answer = api.post(f"/api/v1/namespaces/{ns.name}/read/",
                      json.dumps({"query": "What do I like to eat?", "k": 3}),
                      content_type="application/json")
    assert answer.status_code == 200
    assert "user_favorite_food" in [i["key"] for i in answer.json()["items"]]


def test_a_stopped_re_embedding_resumes_where_it_stopped(ns, settings):
    facts(ns, PROFILE)
    before = {c.key: list(c.embedding) for c in Cell.objects.filter(namespace=ns)}
    settings.PMEM_EMBEDDER = "minilm"
    first_two = list(Cell.objects.filter(namespace=ns).order_by("pk")[:2])
    Namespace.objects.filter(pk=ns.pk).update(reembed={
        "embedder": embedder_id(), "stage": "cells", "after": first_two[-1].pk})
    ns.refresh_from_db()

    seen: list[tuple[int, int]] = []
    namespace_reembed(namespace=ns, progress=lambda done, total: seen.append((done, total)))

    after = {c.key: list(c.embedding) for c in Cell.objects.filter(namespace=ns)}
    kept = [c.key for c in first_two]
    assert all(after[k] == before[k] for k in kept)  # done before the stop: not again
    assert all(after[k] != before[k] for k in after if k not in kept)
    assert seen[-1] == (8, 8) and seen[0][0] > 2


def test_a_new_namespace_records_the_embedder_and_an_empty_one_is_claimed(ns, settings):
    assert ns.embedder == "hashing/384"
    old = Namespace.objects.create(name="older-than-the-record")
    assert old.embedder == ""

    assert read("frontier", namespace=old, query="anything").items == []
    old.refresh_from_db()
    assert old.embedder == "hashing/384"
    settings.PMEM_EMBEDDER = "minilm"  # nothing to mix yet: the new embedder takes it over
    assert read("frontier", namespace=ns, query="anything").items == []
    assert Namespace.objects.get(pk=ns.pk).embedder == "all-MiniLM-L6-v2/384"


def test_an_imported_namespace_is_found_by_its_words_and_records_the_embedder(ns, tmp_path):
    import gzip

    from memory.services.transfer import namespace_export, namespace_import

    rings(ns, 12)
    buffer = io.BytesIO()
    namespace_export(ns, buffer)
    path = tmp_path / "rings.ndjson.gz"
    path.write_bytes(gzip.compress(buffer.getvalue()))

    copy = namespace_import(path, name="rings-copy").namespace

    assert copy.embedder == embedder_id()
    items = read("frontier", namespace=copy, query="Where is ring 11?", k=3).items
    assert items[0]["key"] == "ring_11_location" and items[0]["lexical_score"] == 1.0


@pytest.mark.django_db(transaction=True)
def test_the_background_embedder_embeds_after_the_commits_at_the_last_value(make_namespace,
                                                                          settings):
    from memory.services.embeddings import embeddings_wait

    settings.PMEM_EMBEDDER = "minilm"
    settings.PMEM_EMBED_ASYNC = True
    ns = make_namespace()
    facts(ns, PROFILE)  # committed at once: the vectors come after
    facts(ns, [("user_pet", "a dog named Rex")])

    assert embeddings_wait(timeout=120)
    assert not Cell.objects.filter(namespace=ns, embed_pending=True).exists()
    assert not Evidence.objects.filter(namespace=ns, embedding__isnull=True).exists()
    pet = Cell.objects.get(namespace=ns, key="user_pet")
    assert pet.embedded_text == "user_pet: a dog named Rex"
    top = read("frontier", namespace=ns, query="Which animal lives with me?", k=1).items
    assert top[0]["key"] == "user_pet" and top[0]["value"] == "a dog named Rex"


def test_without_a_name_every_namespace_of_another_embedder_is_re_embedded(make_namespace,
                                                                          settings):
    mine, theirs = make_namespace(), make_namespace()
    facts(mine, PROFILE[:1])
    facts(theirs, PROFILE[:2])
    Namespace.objects.filter(pk=theirs.pk).update(embedder="")  # a namespace older than records

    out = io.StringIO()
    call_command("pmem_reembed", stdout=out)

    assert out.getvalue().splitlines() == [
        f"{theirs.name}: 4 rows re-embedded (an unrecorded embedder -> hashing/384)"]
    assert Namespace.objects.get(pk=theirs.pk).embedder == "hashing/384"
    assert read("frontier", namespace=Namespace.objects.get(pk=theirs.pk), query="pet").items
