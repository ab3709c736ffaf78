"""The log's reasons and methods in a reviewer's words: the
internal reason (``rule: asserted``) stays in the log and the API; the explorer shows this."""

from __future__ import annotations

import re

from .policy import OUTRANKED_REASON

_EXACT = {
    "create": "first value of this key",
    "support": "the same value again: counted as support",
    "value equals the head: support": "the same value as the current one: counted as support",
    "value equals an alternative: support": "the same value as a competing one: counted as "
                                            "support",
    "late report of the head's value: support": "an older report of the current value: "
                                                "counted as support",
    "late report: placed in history at its valid time": "an older report: placed in the "
                                                        "history at its date, not made current",
    "restore into an empty cell": "brought back into the empty key",
    "rollback": "reopened by a retraction",
    OUTRANKED_REASON: "its source is trusted less than the current value's: recorded as a "
                      "competing value",
    "rule: asserted": "the observation states it",
    "rule: hedged": "the observation states it, hedged",
    "rule: reported": "the observation reports it",
    "rule: withdrawn": "the observation says the value was reported in error",
    "rule: create (no head)": "first value of this key",
    "rule: nothing to revoke": "the observation withdraws a value that is not in memory",
    "rule: repeats the head": "the observation repeats the current value",
    "rule: contest of an empty cell": "a competing value for an empty key: taken as the value",
    "rule: conflicting report": "the observation conflicts with the current value",
    "rule: confirmed": "the observation confirms one of the competing values",
    "rule: op hint": "the observation's wording names the operation",
}
_ROLLBACK = re.compile(r"rollback after operation (\d+)")
_METHODS = {
    "explicit": "asked for exactly this",
    "client": "the client's structured fact",
    "rule": "decided by the rule extractor",
    "model": "decided by the model",
    "identity": "key matched by soft identity",
    "reinstate": "rollback",
}


def plain_reason(reason: str) -> str:
    """``reason`` in plain words; a person's own reason (or a model's) is shown as written."""
    text = (reason or "").strip()
    if not text:
        return ""
    if text in _EXACT:
        return _EXACT[text]
    match = _ROLLBACK.fullmatch(text)
    if match:
        return f"reopened because operation {match.group(1)} retracted a newer value"
    if text.startswith("invalid: "):
        return "refused — " + text.removeprefix("invalid: ")
    if text.endswith("; hard_commit"):
        return plain_reason(text.removesuffix("; hard_commit")) + " (forced: hard commit)"
    return text


def plain_method(method: str) -> str:
    return _METHODS.get(method, method)


#: What each operation did, as a sentence about its value (``{v}``); the operation's name
#: stays beside it, on hover, for those who know the vocabulary (SPEC §3).
_SENTENCES = {
    "accept": "{v} became the value",
    "contest": "{v} was added as a competing value",
    "reject": "the value was rejected as wrong; {v} is the correction",
    "revoke": "{v} was retracted",
    "resolve": "{v} won the contest",
    "restore": "{v} came back: a retraction or rejection was undone",
    "reinstate": "{v} came back because the newer value was retracted",
    "noop": "nothing changed",
}
_BARE = {"reject": "the value was rejected as wrong", "noop": "nothing changed"}


def op_sentence(op: str, value: str | None, requested: str = "") -> str:
    """One line of the log in words: what the operation did to the value it names (a
    retraction that reopens the predecessor writes a second line, which says so)."""
    if not value:
        return _BARE.get(op, f"{op} (no value)")
    quoted = f"“{value}”"
    sentence = _SENTENCES.get(op, op + " {v}").format(v=quoted)
    if op == "reinstate" and requested:
        sentence += f" (the second line of a {requested})"
    return sentence[0].upper() + sentence[1:]
