"""Export and import of a namespace with its whole provenance (CONTRACT "Export, import and
backup of a namespace"; the format: docs/export-format.md).

- :func:`export_chunks` / :func:`namespace_export`: the namespace as NDJSON from one snapshot.
- :func:`namespace_import`: check a file whole, then write it as a new namespace in one
  transaction, every id renumbered consistently.
"""

from __future__ import annotations

from .exporter import export_chunks, namespace_export
from .importer import Imported, namespace_import
from .reading import ImportRefused
from .schema import FORMAT, VERSION

__all__ = ["FORMAT", "VERSION", "ImportRefused", "Imported", "export_chunks",
           "namespace_export", "namespace_import"]
