"""Extraction of a chat session (an observation with ``messages``): ONE model call for the
whole session, shown as its transcript (speakers and times), as the paper extracts one call
per session. Only a session whose prompt would not fit the model's context
(``PMEM_LLM_CONTEXT_TOKENS``) is cut, into runs of whole messages, one call each; the
extraction then records how many (``chunks``).

Without a model the rule extractor reads what was said — the client's text and each
message's content — never the transcript's ``speaker: …`` lines, which are no ``key: value``
facts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.conf import settings

from memory.domain import conversation

from . import prompts
from .client import client_from_settings
from .extraction import Memory, TextExtraction, extract_facts, fact_dict, rule_extractor

#: Characters per token assumed when sizing a prompt against the context: few enough that a
#: transcript of short words and punctuation still fits.
CHARS_PER_TOKEN = 3
#: The least transcript one call is given, however small the context is said to be.
MIN_CHUNK_CHARS = 2000


def transcript_budget(shown: Sequence[dict[str, Any]]) -> int:
    """How many characters of transcript one extraction call may carry: the context less the
    answer's tokens and the rest of the prompt (instructions and the heads shown)."""
    answer = settings.PMEM_LLM_MAX_TOKENS or 2048
    overhead = sum(len(m["content"]) for m in prompts.extraction_messages("", shown))
    room = (settings.PMEM_LLM_CONTEXT_TOKENS - answer) * CHARS_PER_TOKEN - overhead
    return max(MIN_CHUNK_CHARS, room)


def extract_conversation(text: str, messages: Sequence[conversation.Message],
                         memory: Memory | None = None) -> TextExtraction:
    """Facts from a session stored as ``text`` (its transcript, after the client's own text
    if any) with its ``messages``."""
    client = client_from_settings()
    own = conversation.preface(text, messages)
    if client is None:
        said = "\n".join([own, *(str(m.get("content") or "") for m in messages)]).strip()
        return TextExtraction([fact_dict(f, "rule") for f in rule_extractor().extract(said)],
                              "rules")
    shown = memory() if memory is not None else []
    budget = transcript_budget(shown)
    if len(text) <= budget:
        parts = [text]
    else:
        parts = ([own] if own else []) + conversation.chunks(messages, budget)
    out = TextExtraction([], "model", shown=shown, chunks=len(parts))
    raws = []
    for part in parts:
        result = extract_facts(client, part, shown)
        out.chat_calls += 1
        out.prompt_tokens += result.prompt_tokens
        out.completion_tokens += result.completion_tokens
        raws.append(result.raw)
        out.dropped += result.dropped
        if result.failure is not None:  # the session fails whole: no half of it is written
            out.failure, out.facts = result.failure, []
            break
        out.facts += [fact_dict(f, "model") for f in result.facts]
    out.raw = raws[0] if len(raws) == 1 else "\n".join(raws)
    return out
