"""What a validated observation asks the services for: the one reading of an
:class:`~memory.api.serializers.ObservationIn`, shared by the single and the batch endpoint
(so a batch item means exactly what the same observation sent alone means)."""

from __future__ import annotations

from typing import Any

from rest_framework.request import Request

from memory.domain import conversation
from memory.domain.instants import parse_instant
from memory.services import source_claim

from .auth import actor_of, caller_scope, token_of

#: The fields of a fact kept as sent; ``annotate`` only when asked for (see below).
_FACT_FIELDS = ("key", "value", "op", "version", "hard_commit", "reason", "metadata",
                "ttl")


def observation_asked(v: dict[str, Any], *, request: Request, namespace: Any) -> dict[str, Any]:
    """The keyword arguments of ``observation_record`` for the validated observation ``v``:
    its facts as kept, its source claimed (403 for one this caller may not name, nothing
    stored), its text (the transcript of its messages after any text of its own) and its
    valid time (given, else the last message's)."""
    # ``annotate`` kept only when asked for: a request sent before it existed digests
    # the same (idempotency_key replays).
    facts = [{k: f[k] for k in _FACT_FIELDS if k in f}
             | ({"annotate": True} if f.get("annotate") else {})
             | ({"expires_at": f["expires_at"].isoformat()} if "expires_at" in f else {})
             for f in v.get("facts", [])]
    # SPEC §8: the source is one this caller may claim (403 otherwise, nothing stored).
    source = source_claim(namespace=namespace, token=token_of(request),
                          scope=caller_scope(request, namespace), source=v.get("source"))
    messages = v.get("messages") or None
    observed_at = v.get("observed_at")
    if observed_at is None and messages:
        observed_at = parse_instant(conversation.last_at(messages), field="observed_at")
    return {"namespace": namespace,
            "text": conversation.observation_text(v.get("text", ""), messages),
            "messages": messages, "facts": facts or None, "source": source,
            "observed_at": observed_at, "idempotency_key": v.get("idempotency_key"),
            "actor": actor_of(request),
            # With facts, the text (or session) is their evidence unless extraction is asked.
            "extract": bool(v.get("extract") and facts)}
