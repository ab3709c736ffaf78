"""Redacting the observations attached to an erased key (SPEC §6): on parsed structures —
text, facts, extraction JSON and model output, ``source``, error, a session's turns — by
:class:`memory.domain.redact.Redactor`, written back with ONE statement."""

from __future__ import annotations

import json
from typing import Any

from django.db import connection

from memory.domain.redact import Redactor
from memory.models import Evidence

from .binding import bound_cursor
from .erase_key import ATTACHED


def redact_evidence(namespace_id: int, cell_id: int, names: list[str],
                     redactor: Redactor) -> tuple[list[int], list[int], bool]:
    """Redact the attached evidence; returns (ids changed, ids whose embedding went stale,
    whether a session's messages changed: their rows were written again without vectors)."""
    with connection.cursor() as cur:
        cur.execute("SELECT e.id, e.text, e.facts, e.extracted, e.source, e.error,"
                    " e.messages"
                    f" FROM memory_evidence e WHERE e.id IN ({ATTACHED})"
                    " ORDER BY e.id FOR UPDATE OF e",
                    {"ns": namespace_id, "cell": cell_id, "names": names})
        rows = cur.fetchall()
    if not redactor:
        return [], [], False
    changed: list[tuple[Any, ...]] = []
    sessions = False
    for pk, text, facts, extracted, source, error, messages in rows:
        new = _redacted_row(redactor, text, _loads(facts), _loads(extracted), source, error)
        old_messages = _loads(messages)
        new_messages = redactor.data(old_messages)  # a session's turns, as its text is
        sessions = sessions or new_messages is not old_messages
        if new is None and new_messages is not old_messages:
            new = (text, json_text(_loads(facts)), json_text(_loads(extracted)), source, error, False)
        if new is not None:
            changed.append((pk, *new[:-1], json_text(new_messages), new[-1]))
    _write_redacted(changed)
    return [c[0] for c in changed], [c[0] for c in changed if c[-1]], sessions


def _loads(raw: Any) -> Any:
    return json.loads(raw) if isinstance(raw, str | bytes) else raw


def _redacted_row(redactor: Redactor, text: str, facts: Any, extracted: Any, source: str,
                  error: str) -> tuple[Any, ...] | None:
    """The redacted columns, or None when nothing held an erased value. The last item says
    whether the embedded text (text, else facts) changed. What the observation's kept facts
    say (their keys and values) is never redacted, in the text or anywhere else in the row."""
    ex_facts = extracted.get("facts") if isinstance(extracted, dict) else None
    keep = redactor.kept(facts, ex_facts)
    new_text = redactor.text(text, keep=keep)
    new_facts = redactor.facts(facts, keep)
    new_extracted = extracted
    if isinstance(extracted, dict):
        # The vectors cache is keyed by "key: value" strings; it is only a cache: drop it.
        new_extracted = {k: redactor.facts(v, keep) if k == "facts" else redactor.data(v, keep)
                         for k, v in extracted.items() if k != "vectors"}
        if len(new_extracted) == len(extracted) and all(
                new_extracted[k] is v for k, v in extracted.items()):
            new_extracted = extracted
    elif extracted is not None:
        new_extracted = redactor.data(extracted, keep)
    new_source = redactor.text(source, max_length=Evidence._meta.get_field("source").max_length)
    new_error = redactor.text(error, keep=keep)
    if (new_text is text and new_facts is facts and new_extracted is extracted
            and new_source is source and new_error is error):
        return None
    return (new_text, json_text(new_facts), json_text(new_extracted), new_source, new_error,
            new_text is not text or new_facts is not facts)


def json_text(data: Any) -> str | None:
    return None if data is None else json.dumps(data, ensure_ascii=False)


def _write_redacted(rows: list[tuple[Any, ...]]) -> None:
    """ONE UPDATE for every redacted row, its columns as arrays bound in binary."""
    if not rows:
        return
    cols = list(zip(*rows, strict=True))
    with bound_cursor() as cur:
        cur.execute(
            "UPDATE memory_evidence AS e SET text = r.text, facts = r.facts::jsonb,"
            " extracted = r.extracted::jsonb, source = r.source, error = r.error,"
            " messages = r.messages::jsonb,"
            " embedding = CASE WHEN r.stale THEN NULL ELSE e.embedding END,"
            # a digest of the request as sent would still answer "was it this value?"
            " request_digest = NULL"
            " FROM unnest(%b::bigint[], %b::text[], %b::text[], %b::text[], %b::text[],"
            " %b::text[], %b::text[], %b::bool[])"
            " AS r(id, text, facts, extracted, source, error, messages, stale)"
            " WHERE e.id = r.id",
            [list(c) for c in cols])
