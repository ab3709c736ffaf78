"""The evidence read (SPEC §7): observations ranked by their meaning fused with the query's
words (PostgreSQL full text search), its score parts, its narrowing (as_of, min_score, no
metadata filter), reading its writes before the embedder has come (SPEC §11.1), and erase
reaching its lexical index (SPEC §6)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from django.db import connection

from memory.domain.evidence_rank import EVIDENCE_LEXICAL_WEIGHT
from memory.models import Evidence

pytestmark = pytest.mark.django_db

TURNS = [
    "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
    "Melanie: That sounds great! I painted a lake sunrise last week.",
    "Caroline: I'm thinking of studying counseling and mental health.",
    "Melanie: We went camping in the mountains with the kids.",
    "Caroline: My friends gave me a hand-painted bowl from Zanzibar for my birthday.",
    "Melanie: I ran a charity race for mental health awareness on Saturday.",
    "Caroline: I'm keen on adopting children some day.",
    "Melanie: My kids love dinosaurs and the museum.",
]


def base(ns) -> str:
    return f"/api/v1/namespaces/{ns.name}/"


def post(api, path, body):
    return api.post(path, json.dumps(body), content_type="application/json")


def say(api, ns, texts) -> None:
    for text in texts:
        assert post(api, base(ns) + "observations/", {"text": text}).status_code == 202


def evidence(api, ns, **body):
    r = post(api, base(ns) + "read/", {"mode": "evidence", **body})
    assert r.status_code == 200, r.content
    return r.json()


def test_a_rare_word_of_the_query_brings_its_turn_first_with_both_score_parts(
        api, ns, commit_pending):
    say(api, ns, TURNS)
    commit_pending()

    body = evidence(api, ns, query="Where did the bowl Caroline got come from?", k=3)

    top = body["items"][0]
    assert "Zanzibar" in top["text"] and body["mode"] == "evidence"
    for item in body["items"]:
        assert item["score"] == pytest.approx(
            item["semantic_score"] + EVIDENCE_LEXICAL_WEIGHT * item["lexical_score"], abs=2e-4)
        assert 0 <= item["lexical_score"] <= 1
    assert top["lexical_score"] > body["items"][1]["lexical_score"]
    assert body["context"].splitlines()[1] == top["text"]
    assert body["context_chars"] == len(body["context"])


def test_words_match_by_their_stem_and_function_words_weigh_nothing(api, ns, commit_pending):
    say(api, ns, TURNS)
    commit_pending()

    items = evidence(api, ns, query="who is adopting a child?", k=8)["items"]
    # "child" meets "children" (the english configuration's stem); "who", "is", "a" do not count
    assert "adopting children" in items[0]["text"] and items[0]["lexical_score"] == 1.0
    assert all(i["lexical_score"] == 0 for i in items if "adopting" not in i["text"])


def test_raw_stays_the_cosine_baseline(api, ns, commit_pending):
    say(api, ns, TURNS)
    commit_pending()

    raw = post(api, base(ns) + "read/", {"query": "mental health", "mode": "raw", "k": 4}).json()

    assert raw["mode"] == "raw" and len(raw["items"]) == 4
    assert all("lexical_score" not in i and "semantic_score" not in i for i in raw["items"])
    scores = [i["score"] for i in raw["items"]]
    assert scores == sorted(scores, reverse=True)
    assert raw["context"].splitlines()[0] == "Retrieved observations (most similar first):"


def test_as_of_reads_only_what_was_committed_then(api, ns, commit_pending):
    say(api, ns, TURNS[:4])
    commit_pending()
    then = datetime.now(UTC)
    say(api, ns, TURNS[4:])
    commit_pending()

    past = evidence(api, ns, query="bowl from Zanzibar", k=8, as_of=then.isoformat())
    now = evidence(api, ns, query="bowl from Zanzibar", k=8)

    assert len(past["items"]) == 4 and not any("Zanzibar" in i["text"] for i in past["items"])
    assert "Zanzibar" in now["items"][0]["text"]


def test_min_score_cuts_items_and_their_lines_and_a_metadata_filter_is_refused(
        api, ns, commit_pending):
    say(api, ns, TURNS)
    commit_pending()
    full = evidence(api, ns, query="bowl from Zanzibar", k=8)
    cut = full["items"][0]["score"] - 1e-3

    body = evidence(api, ns, query="bowl from Zanzibar", k=8, min_score=cut)

    assert [i["id"] for i in body["items"]] == [full["items"][0]["id"]]
    assert body["context"].splitlines() == [full["context"].splitlines()[0],
                                            full["items"][0]["text"]]
    refused = post(api, base(ns) + "read/", {"mode": "evidence", "query": "q",
                                             "filter": {"user": "u1"}})
    assert refused.status_code == 400 and refused.json()["field"] == "filter"


def test_odd_queries_read_without_error(api, ns, commit_pending):
    say(api, ns, TURNS[:3])
    commit_pending()
    for query in ("the of and", "o'brien \\ & | ! ( ) :*", "'", "ns:1"):
        body = evidence(api, ns, query=query, k=2)
        assert len(body["items"]) == 2  # the cosine still ranks


def test_an_observation_is_found_by_its_words_before_the_embedder_comes(
        api, ns, commit_pending, settings):
    """With the deferred embedder working after the commit (PMEM_EMBED_ASYNC), a committed
    observation has no vector yet: the evidence read finds it by its words, ranked by them."""
    settings.PMEM_EMBEDDER = "minilm"
    settings.PMEM_EMBED_ASYNC = True
    say(api, ns, TURNS)
    commit_pending()
    assert Evidence.objects.filter(namespace=ns, state="committed").count() == len(TURNS)
    # The background embedder's own connection cannot see this test's rows: none is embedded.
    assert not Evidence.objects.filter(namespace=ns, embedding__isnull=False).exists()

    items = evidence(api, ns, query="the bowl from Zanzibar", k=3)["items"]

    assert "Zanzibar" in items[0]["text"]
    assert items[0]["semantic_score"] is None and items[0]["lexical_score"] == 1.0
    assert items[0]["score"] == pytest.approx(EVIDENCE_LEXICAL_WEIGHT)


def _lexical_hits(ns, word: str) -> int:
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM memory_evidence e"
                    " WHERE pmem_evidence_lex(e.namespace_id, e.text)"
                    " @@ to_tsquery('english', %s) AND e.namespace_id = %s", [word, ns.pk])
        return cur.fetchone()[0]


def test_an_erased_value_leaves_the_lexical_index_and_the_read(api, ns, commit_pending):
    say(api, ns, ["passcode: Quokkaberry", "colour: teal", *TURNS[:3]])
    commit_pending()
    assert _lexical_hits(ns, "quokkaberry") == 1
    assert "Quokkaberry" in evidence(api, ns, query="Quokkaberry", k=1)["items"][0]["text"]

    assert api.delete(base(ns) + "cells/passcode/").status_code in (200, 204)

    assert _lexical_hits(ns, "quokkaberry") == 0
    body = evidence(api, ns, query="Quokkaberry", k=10)
    assert "quokkaberry" not in json.dumps(body).lower()
    assert all(i["lexical_score"] == 0 for i in body["items"])
