"""Cells of a CSV export that a spreadsheet cannot run (OWASP, "CSV injection").

A spreadsheet reads a cell that starts with ``=``, ``+``, ``-`` or ``@`` as a formula — and a
tab or a carriage return before one as well — so a remembered value such as
``=HYPERLINK("http://evil.example","click")`` would run on the reviewer's machine when the
export is opened. Such a cell gets a leading ``'``, which spreadsheets read as "this is text"
and do not show. Numbers are written as they are: only text is neutralised (a value "-5" is
text and becomes "'-5"; an integer -5 stays a number). Pure Python: no Django import.
"""

from __future__ import annotations

from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def inert_cell(value: Any) -> Any:
    """``value`` as a CSV cell no spreadsheet runs: text starting like a formula gets a
    leading ``'``; anything else is returned unchanged."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value
