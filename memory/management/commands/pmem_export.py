"""``manage.py pmem_export NAMESPACE [--out FILE]`` — the namespace as NDJSON (gzip for .gz),
with its whole provenance (docs/export-format.md). Tokens, sessions and passwords are never
written."""

from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import Any, BinaryIO

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.management.progress import Bar
from memory.models import Namespace
from memory.services.transfer import namespace_export


class _Text:
    """A text stream that takes the export's bytes (UTF-8)."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def write(self, data: bytes) -> int:
        return int(self.stream.write(data.decode()))


class Command(BaseCommand):
    help = "Export a namespace (every observation, version, operation, span, ...) as NDJSON."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("namespace")
        parser.add_argument("--out", type=Path, default=None,
                            help="the file to write (gzip when it ends in .gz); default: stdout")

    def handle(self, *args: Any, **options: Any) -> None:
        namespace = Namespace.objects.filter(name=options["namespace"]).first()
        if namespace is None:
            raise CommandError(f"no namespace named {options['namespace']!r}")
        out: Path | None = options["out"]
        bar = Bar(f"export {namespace.name}")
        if out is None:
            target: Any = self.stdout._out  # the command's stdout (sys.stdout, or a test's)
            raw = getattr(target, "buffer", None)
            namespace_export(namespace, raw if raw is not None else _Text(target),
                             progress=bar)
            target.flush()
            return
        # Written beside the target and renamed when complete: a failed export never leaves a
        # file that looks whole (and an importer would refuse a cut one anyway).
        partial = out.with_name(out.name + ".partial")
        try:
            with partial.open("wb") as raw:
                stream: BinaryIO = (gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6)  # type: ignore[assignment]
                                    if out.name.endswith(".gz") else raw)
                with stream:
                    counts = namespace_export(namespace, stream, progress=bar)
            os.replace(partial, out)
        finally:
            partial.unlink(missing_ok=True)
        self.stderr.write(f"wrote {sum(counts.values()):,} records of {namespace.name} to {out}")
