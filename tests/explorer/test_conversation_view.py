"""The explorer shows a chat session as a conversation: one turn per message, its speaker
and time, the transcript kept one click away."""

from __future__ import annotations

from typing import Any

import pytest

from memory.domain.conversation import observation_text
from memory.services import observation_ingest
from tests.explorer.test_views import client_for

pytestmark = pytest.mark.django_db


def test_an_observation_of_a_session_shows_its_turns(make_namespace: Any,
                                                     make_user: Any) -> None:
    ns = make_namespace("chat")
    said = [{"role": "user", "name": "Caroline", "content": "I <b>went</b> to the group.",
             "at": "2023-05-08T13:56:00Z"},
            {"role": "assistant", "content": "How was it?"}]
    evidence = observation_ingest(namespace=ns, text=observation_text("", said), messages=said)
    page = client_for(make_user("viewer", ns)).get(f"/ns/{ns.name}/observations/{evidence.pk}/")
    body = page.content.decode()
    assert page.status_code == 200
    assert 'data-testid="conversation"' in body and "2 messages" in body
    assert '<span class="speaker">Caroline</span>' in body
    assert '<span class="speaker">assistant</span>' in body
    assert '<time class="muted small" datetime="2023-05-08T13:56:00Z">' in body
    assert "I &lt;b&gt;went&lt;/b&gt; to the group." in body  # escaped, never markup
    plain = observation_ingest(namespace=ns, text="just text")
    other = client_for(make_user("viewer", ns)).get(f"/ns/{ns.name}/observations/{plain.pk}/")
    assert 'data-testid="conversation"' not in other.content.decode()
