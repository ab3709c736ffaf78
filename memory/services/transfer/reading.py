"""Reading an export file line by line, plain or gzip, whatever its name (gzip is recognised by
its first bytes). Lines are split on ``\\n`` only: JSON escapes every control character inside
a string, and U+2028 and its kin are not line breaks here."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

GZIP_MAGIC = b"\x1f\x8b"


class ImportRefused(ValueError):
    """The file cannot be imported; nothing was written. ``line`` is 1-based (0: the file as a
    whole, e.g. the namespace name)."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}" if line else message)
        self.line = line
        self.message = message


def open_binary(path: Path) -> BinaryIO:
    raw = path.open("rb")
    magic = raw.read(2)
    raw.seek(0)
    if magic == GZIP_MAGIC:
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    return raw


def lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(line number, line without its newline). A last line without a newline, or a
    compressed stream that ends early, is refused: the file was cut short."""
    number = 0
    try:
        with open_binary(path) as stream:
            for number, line in enumerate(stream, start=1):  # noqa: B007 — used after
                if not line.endswith(b"\n"):
                    raise ImportRefused(number, "the line does not end: the file is cut short")
                yield number, line[:-1]
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise ImportRefused(number + 1, f"the compressed file is damaged or cut short ({exc})"
                            ) from None
