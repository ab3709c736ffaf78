"""The change feed's calls (SPEC §12), driven by the clients like every other capability."""

from __future__ import annotations

from dataclasses import replace

from ._protocol import Call, Pause, Steps
from ._urls import ns_path, params, rebase
from .types import ChangeEvent

_ns, _params = ns_path, params


def changes_call(namespace: str, *, after: int | None, wait: float | None,
                 limit: int | None) -> Call:
    """A page of the change feed after the cursor ``after``; ``wait``: long-poll that many
    seconds when there is none yet (at most :data:`CHANGES_WAIT_MAX` per request, below the
    client's default timeout; the iterator asks again)."""
    return Call("GET", f"{_ns(namespace)}changes/",
                params=_params(after=after, limit=limit, wait=None if wait is None
                               else max(0, min(CHANGES_WAIT_MAX, round(wait)))))


#: The longest long poll one request asks for (the server takes up to 60 s).
CHANGES_WAIT_MAX = 45
#: Seconds between a long poll that brought nothing and the next.
CHANGES_EMPTY_PAUSE = 1.0


def changes_page(call: Call, base_url: str) -> Steps[tuple[list[ChangeEvent], Call]]:
    """One page of the feed, and the call of the next (the feed's ``next`` always names one:
    the events after these, whether or not any committed yet)."""
    reply = yield call
    body = reply.body or {}
    events = [ChangeEvent.from_json(item) for item in body.get("results") or []]
    if not events and (call.params or {}).get("wait"):
        # Nothing came: the wait ran out, or the server had no thread to spare for it and
        # answered at once. A pause, so that a busy server is not asked in a tight loop.
        yield Pause(CHANGES_EMPTY_PAUSE)
    following = body.get("next")
    if following:
        return events, Call("GET", rebase(following, base_url))
    after = events[-1].cursor if events else (call.params or {}).get("after")
    return events, replace(call, params={**(call.params or {}),
                                         **({"after": str(after)} if after else {})})
