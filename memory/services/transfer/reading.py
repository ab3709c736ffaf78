"""Reading an export file line by line, plain or gzip, whatever its name (gzip is recognised by
its first bytes). Lines are split on ``\\n`` only: JSON escapes every control character inside
a string, and U+2028 and its kin are not line breaks here.

The file is read (and decompressed) in chunks of :data:`CHUNK` bytes, never a line at a time:
a line longer than the longest record the API could have produced
(:meth:`memory.domain.admission.Limits.line_bytes`) is refused with its number as soon as that
many bytes of it have been read, so an import holds bounded memory whatever the file (a
1.5 MB ``.gz`` may hold a 1.5 GB line)."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ..admission import limits

GZIP_MAGIC = b"\x1f\x8b"
CHUNK = 1 << 20


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


def lines(path: Path, max_line: int | None = None) -> Iterator[tuple[int, bytes]]:
    """(line number, line without its newline). A last line without a newline, or a
    compressed stream that ends early, is refused: the file was cut short. A line over
    ``max_line`` bytes (default: the longest record the API could produce) is refused."""
    most = max_line if max_line is not None else limits().line_bytes()
    number = 0
    try:
        with open_binary(path) as stream:
            pending = bytearray()
            while chunk := stream.read(CHUNK):
                start = 0
                while (end := chunk.find(b"\n", start)) >= 0:
                    number += 1
                    if pending:
                        pending += chunk[start:end]
                        line, pending = bytes(pending), bytearray()
                    else:
                        line = chunk[start:end]
                    _bounded(number, len(line), most)
                    yield number, line
                    start = end + 1
                pending += chunk[start:]
                _bounded(number + 1, len(pending), most)
            if pending:
                raise ImportRefused(number + 1, "the line does not end: the file is cut short")
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise ImportRefused(number + 1, f"the compressed file is damaged or cut short ({exc})"
                            ) from None


def _bounded(number: int, size: int, most: int) -> None:
    if size > most:
        raise ImportRefused(number, f"the line is longer than {most} bytes, more than any"
                                    " record the API could have produced: not an export of"
                                    " this service, or damaged")
