"""A chat session through a model (the scripted OpenAI-compatible server over real HTTP):
ONE extraction call per session, shown its speakers and times; cut into several calls only
when its prompt would not fit the model's context, and then the extraction says so."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from memory.llm.client import endpoint_forms
from memory.models import Evidence
from tests.api.test_api import base, post
from tests.support.scripted_llm import ScriptedLLM, scripted_llm  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db
CHAT_JOBS = ("extraction", "annotation", "identity")


@pytest.fixture
def model(settings: Any, scripted_llm: ScriptedLLM) -> Iterator[ScriptedLLM]:  # noqa: F811
    settings.PMEM_LLM_BASE_URL, settings.PMEM_LLM_MODEL = scripted_llm.base_url, "scripted"
    settings.PMEM_LLM_MAX_RETRIES, settings.PMEM_LLM_TIMEOUT = 0, 5.0
    endpoint_forms.clear()
    yield scripted_llm
    endpoint_forms.clear()


def session(n: int, turns: int = 20) -> list[dict[str, Any]]:
    """Session ``n`` of a two-person chat, LoCoMo's shape: names, the session's time first."""
    said = [{"role": "user", "name": ("Caroline", "Melanie")[i % 2],
             "content": f"Session {n}, turn {i}: I went to the lake {i} times. What about you?"}
            for i in range(turns)]
    said[0]["at"] = f"2023-05-{n + 1:02d}T13:56:00Z"
    return said


def test_each_session_is_one_extraction_call_shown_speakers_and_times(api, ns, model,
                                                                      commit_pending):
    for n in range(6):
        assert post(api, base(ns) + "observations/", {"messages": session(n)}).status_code == 202
    commit_pending()
    rows = list(Evidence.objects.filter(namespace=ns).order_by("seq"))
    assert [r.state for r in rows] == ["committed"] * 6
    assert [r.chat_calls for r in rows] == [1] * 6
    calls = sum(model.counts[job] for job in CHAT_JOBS)
    assert calls / len(rows) <= 1.2
    [first, *_] = model.requests_for("extraction")
    shown = first.body["messages"][-1]["content"]
    assert "[1, 2023-05-01 13:56 UTC] Caroline: Session 0, turn 0:" in shown
    assert "[2] Melanie: Session 0, turn 1:" in shown
    assert "chunks" not in rows[0].extracted


def test_a_session_past_the_context_is_cut_into_whole_messages_and_says_so(
        api, ns, model, commit_pending, settings):
    settings.PMEM_LLM_CONTEXT_TOKENS, settings.PMEM_LLM_MAX_TOKENS = 1400, 512
    long_one = session(0, turns=120)
    post(api, base(ns) + "observations/", {"messages": long_one})
    commit_pending()
    evidence = Evidence.objects.get(namespace=ns)
    calls = model.requests_for("extraction")
    assert evidence.state == "committed"
    assert len(calls) == evidence.chat_calls == evidence.extracted["chunks"] > 1
    shown = [c.body["messages"][-1]["content"] for c in calls]
    for number, message in enumerate(long_one[1:], start=2):  # every turn in one call
        line = f"[{number}] {message['name']}: {message['content']}\n"
        assert sum(line in s + "\n" for s in shown) == 1
