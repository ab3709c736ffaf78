"""The evidence read inside chat sessions (SPEC §7): an observation that holds ``messages`` is
ranked by its messages, and its item names the turns that matched (each with its score parts)
instead of the whole transcript; read as soon as written (SPEC §11.1), as of a past time, cut
by min_score, and an erase (SPEC §6) takes the erased value out of the messages' index."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from django.db import connection

from memory.domain.evidence_rank import EVIDENCE_LEXICAL_WEIGHT
from memory.models import Evidence

pytestmark = pytest.mark.django_db

TALK = [
    ("Caroline", "Hey Mel! How was your week?"),
    ("Melanie", "Busy with the kids, but good. We went swimming on Sunday."),
    ("Caroline", "I went to the LGBTQ support group yesterday and it was so powerful."),
    ("Melanie", "That sounds great! I painted a lake sunrise last week."),
    ("Caroline", "My friends gave me a hand-painted bowl from Zanzibar for my birthday."),
    ("Melanie", "What a lovely present. Pottery is my favourite thing to make too."),
    ("Caroline", "I'm thinking of studying counseling and mental health."),
    ("Melanie", "You would be great at it. Take care!"),
]


def base(ns) -> str:
    return f"/api/v1/namespaces/{ns.name}/"


def post(api, path, body):
    return api.post(path, json.dumps(body), content_type="application/json")


def messages(talk=TALK, at=None):
    return [{"role": "user" if who == "Caroline" else "assistant", "name": who,
             "content": text, **({"at": at} if at else {})} for who, text in talk]


def write(api, ns, body) -> None:
    assert post(api, base(ns) + "observations/", body).status_code == 202


def read(api, ns, mode="evidence", **body):
    r = post(api, base(ns) + "read/", {"mode": mode, **body})
    assert r.status_code == 200, r.content
    return r.json()


def test_a_session_item_names_the_turn_that_matched_not_the_whole_session(
        api, ns, commit_pending):
    write(api, ns, {"messages": messages(at="2023-05-08T13:56:00Z"), "source": "chat"})
    write(api, ns, {"text": "Melanie: My kids love dinosaurs and the museum."})
    commit_pending()

    body = read(api, ns, query="Where did the bowl Caroline got come from?", k=1)

    (item,) = body["items"]
    (turn,) = item["messages"]
    assert turn["index"] == 5 and turn["name"] == "Caroline" and turn["role"] == "user"
    assert turn["content"] == TALK[4][1] and turn["at"] == "2023-05-08T13:56:00Z"
    assert turn["line"] == f"[5, 2023-05-08 13:56 UTC] Caroline: {TALK[4][1]}"
    assert turn["lexical_score"] > 0 and turn["semantic_score"] is not None
    assert turn["score"] == pytest.approx(
        turn["semantic_score"] + EVIDENCE_LEXICAL_WEIGHT * turn["lexical_score"], abs=2e-4)
    # the item is its best turn: its scores, and its text the turn's line only
    assert (item["score"], item["lexical_score"]) == (turn["score"], turn["lexical_score"])
    assert item["text"] == turn["line"] and item["source"] == "chat"
    assert body["context"].splitlines()[1:] == [turn["line"]]
    assert "swimming" not in body["context"]


def test_k_counts_turns_and_one_session_gathers_its_turns_in_their_order(
        api, ns, commit_pending):
    write(api, ns, {"messages": messages()})
    commit_pending()

    items = read(api, ns, query="Caroline bowl Zanzibar, mental health counseling",
                 k=2)["items"]

    assert len(items) == 1
    assert [m["index"] for m in items[0]["messages"]] == [5, 7]
    assert items[0]["text"].splitlines() == [m["line"] for m in items[0]["messages"]]
    assert items[0]["score"] == max(m["score"] for m in items[0]["messages"])


def test_raw_reads_a_session_whole_as_before(api, ns, commit_pending):
    write(api, ns, {"messages": messages()})
    commit_pending()

    (item,) = read(api, ns, mode="raw", query="bowl from Zanzibar", k=1)["items"]

    assert "messages" not in item and "lexical_score" not in item
    # the whole transcript, on one line as every raw line
    assert item["text"] == " ".join(Evidence.objects.get(namespace=ns).text.split())
    assert all(f"[{n}]" in item["text"] for n in range(1, len(TALK) + 1))


def test_a_session_is_found_by_its_turn_before_the_embedder_comes(
        api, ns, commit_pending, settings):
    """With the background embedder on (MiniLM, PMEM_EMBED_ASYNC) the session's messages
    have no vector yet when the read comes right after the commit: the turn is found by its
    words at once, and ranked by them."""
    settings.PMEM_EMBEDDER = "minilm"
    settings.PMEM_EMBED_ASYNC = True
    write(api, ns, {"messages": messages()})
    commit_pending()
    assert Evidence.objects.get(namespace=ns).state == "committed"
    with connection.cursor() as cur:  # the embedder's own connection cannot see this test's rows
        cur.execute("SELECT count(*), count(embedding) FROM memory_evidencemessage"
                    " WHERE namespace_id = %s", [ns.pk])
        assert cur.fetchone() == (len(TALK), 0)

    (item,) = read(api, ns, query="the bowl from Zanzibar", k=1)["items"]

    (turn,) = item["messages"]
    assert turn["index"] == 5 and turn["semantic_score"] is None
    assert turn["lexical_score"] == 1.0 and item["semantic_score"] is None


def test_the_messages_are_embedded_after_the_commit(api, ns, commit_pending):
    write(api, ns, {"messages": messages()})
    commit_pending()

    with connection.cursor() as cur:
        cur.execute("SELECT count(embedding) FROM memory_evidencemessage"
                    " WHERE namespace_id = %s", [ns.pk])
        assert cur.fetchone()[0] == len(TALK)
    (item,) = read(api, ns, query="a lake sunrise painting", k=1)["items"]
    assert item["messages"][0]["index"] == 4 and item["messages"][0]["semantic_score"] > 0


def test_as_of_and_min_score_narrow_the_turns(api, ns, commit_pending):
    write(api, ns, {"messages": messages(TALK[:4])})
    commit_pending()
    then = datetime.now(UTC)
    write(api, ns, {"messages": messages(TALK[4:])})
    commit_pending()

    past = read(api, ns, query="bowl from Zanzibar", k=8, as_of=then.isoformat())
    assert past["items"] and "Zanzibar" not in json.dumps(past)
    full = read(api, ns, query="bowl from Zanzibar", k=8)
    assert full["items"][0]["messages"][0]["content"] == TALK[4][1]
    best = full["items"][0]["score"]

    cut = read(api, ns, query="bowl from Zanzibar", k=8, min_score=best - 1e-3)

    assert [i["id"] for i in cut["items"]] == [full["items"][0]["id"]]
    assert cut["context"].splitlines()[1:] == full["items"][0]["text"].splitlines()


def _message_rows(ns, word: str) -> tuple[int, int]:
    """The namespace's message rows whose line holds ``word``, and those its lexical index
    finds for it."""
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FILTER (WHERE m.line ILIKE %s),"
                    " count(*) FILTER (WHERE pmem_evidence_lex(m.namespace_id, m.line)"
                    " @@ to_tsquery('english', %s))"
                    " FROM memory_evidencemessage m WHERE m.namespace_id = %s",
                    [f"%{word}%", word, ns.pk])
        return cur.fetchone()


def test_an_erased_value_leaves_the_messages_their_index_and_the_read(
        api, ns, commit_pending):
    talk = [*TALK[:3], ("Caroline", "My locker passcode is Quokkaberry, don't tell."),
            *TALK[3:]]
    write(api, ns, {"messages": messages(talk),
                    "facts": [{"key": "passcode", "value": "Quokkaberry"}]})
    write(api, ns, {"messages": messages(TALK)})  # never named the value: untouched
    commit_pending()
    assert _message_rows(ns, "quokkaberry") == (1, 1)
    assert read(api, ns, query="Quokkaberry", k=1)["items"][0]["messages"][0]["index"] == 4

    assert api.delete(base(ns) + "cells/passcode/").status_code in (200, 204)

    assert _message_rows(ns, "quokkaberry") == (0, 0)
    body = read(api, ns, query="Quokkaberry", k=10)
    assert "quokkaberry" not in json.dumps(body).lower()
    assert all(i["lexical_score"] == 0 for i in body["items"])
    with connection.cursor() as cur:  # the redacted session's turns are all still there
        cur.execute("SELECT e.id, count(m.id), count(m.embedding) FROM memory_evidence e"
                    " JOIN memory_evidencemessage m ON m.evidence_id = e.id"
                    " WHERE e.namespace_id = %s GROUP BY e.id ORDER BY e.id", [ns.pk])
        assert cur.fetchall()[0][1:] == (len(talk), len(talk))


def test_re_embedding_a_namespace_re_embeds_its_sessions_messages(api, ns, commit_pending,
                                                                   settings):
    """No message keeps a vector of the embedder the namespace leaves: each is embedded again
    by the new one before the namespace is recorded as its."""
    from memory.services.reembed import namespace_reembed

    write(api, ns, {"messages": messages()})
    commit_pending()

    def vectors() -> list[str]:
        with connection.cursor() as cur:
            cur.execute("SELECT embedding::text FROM memory_evidencemessage"
                        " WHERE namespace_id = %s ORDER BY position", [ns.pk])
            return [row[0] for row in cur.fetchall()]

    hashed = vectors()
    settings.PMEM_EMBEDDER = "minilm"
    ns.refresh_from_db()
    namespace_reembed(namespace=ns)

    again = vectors()
    assert len(again) == len(TALK) and None not in again
    assert not set(again) & set(hashed)
    (item,) = read(api, ns, query="a lake sunrise painting", k=1)["items"]
    assert item["messages"][0]["index"] == 4 and item["messages"][0]["semantic_score"] > 0
