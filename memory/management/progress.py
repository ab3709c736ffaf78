"""A one-line progress bar on standard error, drawn only on a terminal (a pipe or a log gets
nothing: the commands' output stays machine-readable)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Bar:
    def __init__(self, label: str, stream: TextIO | None = None, width: int = 30,
                 every: float = 0.2) -> None:
        self.label, self.width, self.every = label, width, every
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.started = time.monotonic()
        self.drawn = 0.0

    def __call__(self, done: int, total: int) -> None:
        if not self.tty:
            return
        now = time.monotonic()
        if done < total and now - self.drawn < self.every:
            return
        self.drawn = now
        filled = self.width * done // max(total, 1)
        elapsed = now - self.started
        rate = done / elapsed if elapsed > 0 else 0.0
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (self.width - filled)}]"
                          f" {done:,}/{total:,} records  {rate:,.0f}/s  {elapsed:.0f}s")
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()
