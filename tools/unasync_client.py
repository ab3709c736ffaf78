"""The Python client's blocking core, made from its asyncio core.

``python tools/unasync_client.py`` writes ``pmem_client/_sync_core.py`` from
``pmem_client/_async_core.py`` with unasync (``async``/``await`` dropped, the names below
renamed); ``--check`` writes nothing and exits 1 when the file is not what the async core gives
now (tests/agents/test_client_generated.py runs it). The two client classes stay one definition:
a capability is added to the async core, and this tool gives the blocking one.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

import tokenize_rt
import unasync

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "pmem_client" / "_async_core.py"
TARGET = ROOT / "pmem_client" / "_sync_core.py"
HEADER = ("# Generated from _async_core.py by tools/unasync_client.py: do not edit.\n"
          "# Regenerate with `.venv/bin/python tools/unasync_client.py`.\n")
#: Beyond unasync's own (``AsyncIterator`` -> ``Iterator``, ``__aenter__`` -> ``__enter__``, ...).
RENAMES = {
    "AsyncCore": "SyncCore",
    "AsyncClient": "Client",  # httpx2's
    "asyncio": "time",  # asyncio.sleep -> time.sleep
    "_async_core": "_sync_core",
}


def generated() -> str:
    rule = unasync.Rule("", "", additional_replacements=RENAMES)
    tokens = tokenize_rt.src_to_tokens(SOURCE.read_text())
    return HEADER + tokenize_rt.tokens_to_src(list(rule._unasync_tokens(tokens)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when pmem_client/_sync_core.py is out of date")
    args = parser.parse_args()
    text = generated()
    if args.check:
        current = TARGET.read_text() if TARGET.exists() else ""
        if current != text:
            sys.stdout.writelines(difflib.unified_diff(
                current.splitlines(True), text.splitlines(True), str(TARGET), "generated"))
            print("pmem_client/_sync_core.py is out of date: run tools/unasync_client.py",
                  file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
