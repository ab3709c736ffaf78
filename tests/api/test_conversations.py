"""A chat session as one observation (CONTRACT "Conversations and batches"): its messages
kept with it, read as its transcript, its valid time the last message's, bad turns refused
by their path."""

from __future__ import annotations

import pytest

from memory.models import Evidence
from tests.api.test_api import base, post

pytestmark = pytest.mark.django_db

SESSION = [
    {"role": "user", "name": "Caroline", "content": "I went to the support group yesterday.",
     "at": "2023-05-08T13:56:00+02:00"},
    {"role": "assistant", "name": "Melanie", "content": "That's great!\nHow was it?",
     "at": "2023-05-08T13:57:00Z"},
    {"role": "user", "content": "favourite_colour: teal"},
]


def send(api, ns, body, wait=False):
    return post(api, base(ns) + "observations/" + ("?wait=1" if wait else ""), body)


def test_a_session_is_one_observation_read_as_its_transcript(api, ns):
    answer = send(api, ns, {"messages": SESSION}, wait=True)
    assert answer.status_code == 201, answer.json()
    body = answer.json()
    assert body["text"] == ("[1, 2023-05-08 11:56 UTC] Caroline: I went to the support group "
                            "yesterday.\n[2, 2023-05-08 13:57 UTC] Melanie: That's great!\n  "
                            "How was it?\n[3] user: favourite_colour: teal")
    # Kept as sent, the times as the instants they name (in UTC).
    assert body["messages"][0] == {**SESSION[0], "at": "2023-05-08T11:56:00Z"}
    assert body["messages"][2] == SESSION[2]
    assert body["observed_at"].startswith("2023-05-08T13:57:00")
    assert Evidence.objects.get(pk=body["id"]).messages[1]["name"] == "Melanie"
    # Without a model the rule extractor reads what was said, never "Caroline: …" as a fact.
    assert [(o["key"], o["value"]) for o in body["operations"]] == [
        ("favourite_colour", "teal")]


def test_the_raw_read_shows_the_speakers(api, ns):
    send(api, ns, {"messages": SESSION}, wait=True)
    read = post(api, base(ns) + "read/", {"query": "support group", "mode": "raw"}).json()
    assert "Caroline: I went to the support group" in read["context"]


def test_a_given_observed_at_wins_and_text_comes_first(api, ns):
    body = send(api, ns, {"text": "Session 1.", "messages": SESSION[:1],
                          "observed_at": "2024-01-01T00:00:00Z"}, wait=True).json()
    assert body["text"].startswith("Session 1.\n\n[1, 2023-05-08 11:56 UTC] Caroline:")
    assert body["observed_at"].startswith("2024-01-01")


@pytest.mark.parametrize(("messages", "field"), [
    ([{"role": "user"}], "messages[0].content"),
    ([SESSION[0], {"role": "user", "content": "  "}], "messages[1].content"),
    ([SESSION[0], SESSION[1], {"role": "user", "content": "x", "at": "2023-05-08T13:57:00"}],
     "messages[2].at"),
    ([{"role": "user", "content": "x", "at": "yesterday"}], "messages[0].at"),
    ([{"role": 5, "content": "x"}], "messages[0].role"),
    ([{"content": "x"}], "messages[0].role"),
    ([{"role": "user", "content": "x", "name": ["a"]}], "messages[0].name"),
    ("hi", "messages"),
    ([], "messages"),
    ([{"role": "user", "content": "x"}] * 501, "messages"),
])
def test_a_bad_message_is_refused_by_its_path(api, ns, messages, field):
    answer = send(api, ns, {"messages": messages})
    assert answer.status_code == 400
    assert answer.json()["field"] == field
    assert not Evidence.objects.filter(namespace=ns).exists()


def test_a_replayed_session_is_one_and_another_session_under_its_key_is_409(api, ns):
    first = send(api, ns, {"messages": SESSION, "idempotency_key": "s1"}).json()
    again = send(api, ns, {"messages": SESSION, "idempotency_key": "s1"})
    assert again.status_code == 202 and again.json()["id"] == first["id"]
    changed = [*SESSION[:2], {"role": "user", "content": "favourite_colour: red"}]
    assert send(api, ns, {"messages": changed, "idempotency_key": "s1"}).status_code == 409
    assert Evidence.objects.filter(namespace=ns).count() == 1


def test_an_erase_redacts_the_session_s_messages_as_its_text(ns):
    from memory.services import cell_erase, observation_ingest

    said = [{"role": "user", "name": "Ann", "content": "passcode: Zanzibar-4471"},
            {"role": "assistant", "content": "Noted, Zanzibar-4471 it is."}]
    from memory.domain.conversation import observation_text

    evidence = observation_ingest(namespace=ns, text=observation_text("", said), messages=said)
    cell_erase(namespace=ns, key="passcode", actor="user:t")
    evidence.refresh_from_db()
    assert "Zanzibar-4471" not in evidence.text
    assert "Zanzibar-4471" not in str(evidence.messages)
    assert evidence.messages[0]["name"] == "Ann" and evidence.messages[1]["role"] == "assistant"
