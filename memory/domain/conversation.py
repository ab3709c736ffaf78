"""A chat session as one observation: its messages, and the text they are read as.

An observation may carry ``messages`` — ``[{role, content, name?, at?}]`` — beside or instead
of ``text``. It is stored with its messages exactly as validated, and its text is the
transcript: one line per message, ``[n] speaker: content`` — its number in the session, the
time where given (``[n, 2023-05-08 13:56 UTC]``), the speaker (its name, else its role) — so
that the raw reads, the embedding and the model's extraction all see who said what when. The
bracket also keeps a line from reading as a ``speaker: value`` fact to the rule extractor
(and to the scripted test model, which answers with it).
Pure Python: no Django import.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

#: Most messages one observation may carry (CONTRACT "Conversations and batches").
MAX_MESSAGES = 500
#: Longest role name (user, assistant, system, tool, or a framework's own).
MAX_ROLE_CHARS = 32
#: Longest speaker name.
MAX_NAME_CHARS = 200

Message = Mapping[str, Any]


def instant_text(moment: datetime) -> str:
    """How a message's time is stored: ISO 8601 in UTC with a ``Z`` (what was validated)."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _shown_time(at: str) -> str:
    """A stored time as the transcript shows it: ``2023-05-08 13:56 UTC`` (seconds only when
    there are any)."""
    try:
        moment = datetime.fromisoformat(at).astimezone(UTC)
    except ValueError:  # stored by an older writer in another form: shown as it is
        return at
    shown = moment.strftime("%Y-%m-%d %H:%M:%S" if moment.second else "%Y-%m-%d %H:%M")
    return f"{shown} UTC"


def speaker(message: Message) -> str:
    return str(message.get("name") or message.get("role") or "")


def message_line(message: Message, number: int) -> str:
    """Message ``number`` of its session as a transcript line: ``[n] speaker: content``, or
    ``[n, time] speaker: content``. A content of several lines stays one message: its later
    lines are indented under the first."""
    content = str(message.get("content") or "").strip().replace("\n", "\n  ")
    at = message.get("at")
    head = f"[{number}, {_shown_time(str(at))}]" if at else f"[{number}]"
    return f"{head} {speaker(message)}: {content}"


def render_messages(messages: Sequence[Message], first: int = 1) -> str:
    """The transcript of ``messages``, one line each, in their order, numbered from
    ``first``."""
    return "\n".join(message_line(m, first + i) for i, m in enumerate(messages))


def observation_text(text: str, messages: Sequence[Message] | None) -> str:
    """What an observation with ``messages`` stores as its text: the client's ``text`` (when
    any) and then the transcript, separated by a blank line."""
    if not messages:
        return text
    transcript = render_messages(messages)
    return f"{text.strip()}\n\n{transcript}" if text.strip() else transcript


def preface(stored_text: str, messages: Sequence[Message]) -> str:
    """The client's own ``text`` of an observation stored by :func:`observation_text`: what
    precedes the transcript ("" when there was none)."""
    transcript = render_messages(messages)
    if stored_text.endswith(transcript):
        return stored_text[:-len(transcript)].strip()
    return ""


def last_at(messages: Sequence[Message] | None) -> str | None:
    """The time of the last message that has one: an observation's default ``observed_at``."""
    for message in reversed(messages or []):
        if message.get("at"):
            return str(message["at"])
    return None


def chunks(messages: Sequence[Message], budget_chars: int) -> list[str]:
    """The transcript of ``messages`` cut into runs of whole messages, each within
    ``budget_chars`` (a message longer than that alone is a run of its own): in order, every
    message in exactly one run, numbered as in the whole session."""
    runs: list[list[str]] = [[]]
    used = 0
    for number, message in enumerate(messages, start=1):
        line = message_line(message, number)
        if runs[-1] and used + len(line) + 1 > budget_chars:
            runs.append([])
            used = 0
        runs[-1].append(line)
        used += len(line) + 1
    return ["\n".join(run) for run in runs if run]
