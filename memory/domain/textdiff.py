"""A word-level difference between two values, for the side-by-side comparison of two
versions (the side-by-side comparison). Pure: segments in, the template marks them."""

from __future__ import annotations

import difflib
import re

#: Words and the whitespace between them, kept, so the segments join back to the value.
_TOKENS = re.compile(r"\s+|[^\s]+")
#: Values longer than this (in tokens) are compared as wholes: the comparison stays cheap.
MAX_TOKENS = 5000

Segment = tuple[str, str]  # (kind, text): kind is "same", "removed" or "added"


def word_diff(old: str, new: str) -> tuple[list[Segment], list[Segment]]:
    """The segments of ``old`` (same / removed) and of ``new`` (same / added)."""
    a, b = _TOKENS.findall(old), _TOKENS.findall(new)
    if len(a) > MAX_TOKENS or len(b) > MAX_TOKENS:
        same = old == new
        return ([("same" if same else "removed", old)], [("same" if same else "added", new)])
    left: list[Segment] = []
    right: list[Segment] = []
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            _add(left, "same", a[i1:i2])
            _add(right, "same", b[j1:j2])
        else:
            _add(left, "removed", a[i1:i2])
            _add(right, "added", b[j1:j2])
    return left, right


def _add(out: list[Segment], kind: str, tokens: list[str]) -> None:
    if tokens:
        out.append((kind, "".join(tokens)))
