"""``manage.py pmem_import FILE [--as NAME]`` — a namespace from a ``pmem_export`` file, with a
new review token: prints one JSON line ``{"namespace", "token", "counts"}``. The whole file is
checked first; a damaged, newer-version or edited file, or a name that is taken, is refused
with the line at fault and writes nothing."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.management.progress import Bar
from memory.services.transfer import ImportRefused, namespace_import


class Command(BaseCommand):
    help = "Import a namespace from a pmem_export file (plain or gzip) under a new name."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="the export file; '-' reads standard input")
        parser.add_argument("--as", dest="name", default=None,
                            help="the new namespace's name (default: the exported one)")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["file"] == "-":
            # Read twice (check, then write): standard input is kept in a temporary file.
            with tempfile.NamedTemporaryFile(prefix="pmem-import-", suffix=".ndjson") as tmp:
                shutil.copyfileobj(sys.stdin.buffer, tmp)
                tmp.flush()
                self._import(Path(tmp.name), options["name"])
            return
        path = Path(options["file"])
        if not path.is_file():
            raise CommandError(f"no such file: {path}")
        self._import(path, options["name"])

    def _import(self, path: Path, name: str | None) -> None:
        try:
            imported = namespace_import(path, name=name, check_progress=Bar("check"),
                                        write_progress=Bar("write"))
        except ImportRefused as exc:
            raise CommandError(f"{path}: refused, nothing written: {exc}") from None
        self.stdout.write(json.dumps(imported.as_dict()))
