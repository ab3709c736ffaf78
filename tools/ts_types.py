"""The TypeScript client's types, generated from the OpenAPI schema the app serves.

``python tools/ts_types.py`` writes ``clients/typescript/src/schema.ts`` (openapi-typescript,
the exact version of package.json); ``--check`` writes nothing and exits 1 when the file is not
what the schema gives now (``make test`` runs it, through tests/agents/test_typescript.py).
"""

from __future__ import annotations

import argparse
import difflib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "clients" / "typescript" / "src" / "schema.ts"
GENERATOR = ROOT / "node_modules" / ".bin" / "openapi-typescript"
HEADER = ("// Generated from P-Mem's OpenAPI schema by tools/ts_types.py (openapi-typescript):\n"
          "// do not edit. Regenerate with `.venv/bin/python tools/ts_types.py`.\n")


def schema_json() -> str:
    """The OpenAPI document the app serves at /api/schema/, as JSON."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pmem_site.settings")
    import django

    django.setup()
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    schema = SchemaGenerator().get_schema(request=None, public=True)
    return OpenApiJsonRenderer().render(schema, renderer_context={}).decode()


def generated() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        source, out = Path(tmp) / "openapi.json", Path(tmp) / "schema.ts"
        source.write_text(schema_json())
        subprocess.run([str(GENERATOR), str(source), "-o", str(out)], check=True,
                       capture_output=True)
        return HEADER + out.read_text()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when the committed types are not the schema's")
    args = parser.parse_args(argv)
    fresh = generated()
    if not args.check:
        TARGET.write_text(fresh)
        return 0
    current = TARGET.read_text() if TARGET.exists() else ""
    if current == fresh:
        return 0
    sys.stdout.writelines(difflib.unified_diff(
        current.splitlines(keepends=True), fresh.splitlines(keepends=True),
        str(TARGET.relative_to(ROOT)), "the schema now"))
    print(f"\n{TARGET.relative_to(ROOT)} is stale: run .venv/bin/python tools/ts_types.py")
    return 1


if __name__ == "__main__":
    sys.exit(main())
