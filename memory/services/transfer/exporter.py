"""``pmem_export``: a namespace as NDJSON, streamed from one snapshot (docs/export-format.md).

The header's counts and every record come from the same REPEATABLE READ snapshot, so a file
is one instant of the namespace however long the export runs and whatever commits meanwhile.
PostgreSQL renders each record (``row_to_json``: no model instances, no Python per field), and
each table is read through one server-side cursor in batches: the exporter's memory does not
grow with the namespace (``pmem_bench transfer`` measures it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import metadata
from typing import Any, Protocol

from django.db import connection, transaction
from django.utils import timezone

from memory.models import Namespace

from .schema import RECORDS, VERSION, Header, Record, fields_for

#: Rows fetched from a server-side cursor at a time.
BATCH = 2000
Progress = Callable[[int, int], None]


class Sink(Protocol):
    def write(self, data: bytes, /) -> Any: ...


def _select(record: Record, version: int) -> str:
    columns = [f"'{record.type}' AS type"]
    if record.has_id:
        columns.append("t.id AS id")
    columns += [f"{f.select} AS {f.name}" for f in fields_for(record, version)]
    return (f"SELECT row_to_json(r)::text FROM (SELECT {', '.join(columns)} {record.source})"
            f" AS r ORDER BY r.{record.order}")


def _count(record: Record) -> str:
    return f"SELECT count(*) {record.source}"


@contextmanager
def _snapshot() -> Iterator[None]:
    """One read-only REPEATABLE READ transaction, or the caller's when it holds one."""
    if connection.in_atomic_block:
        yield
        return
    with transaction.atomic():
        with connection.cursor() as cur:
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield


#: Whether a namespace holds anything a format version added (none: an older reader's file).
_NEEDS = {2: "SELECT EXISTS (SELECT 1 FROM memory_version WHERE namespace_id = %(ns)s"
             " AND metadata IS NOT NULL)",
          3: "SELECT EXISTS (SELECT 1 FROM memory_evidence WHERE namespace_id = %(ns)s"
             " AND messages IS NOT NULL)",
          # facts that expire (SPEC §13), and with them the ``expired`` status and ``expire``
          4: "SELECT EXISTS (SELECT 1 FROM memory_version WHERE namespace_id = %(ns)s"
             " AND expires_at IS NOT NULL)"}
assert sorted(_NEEDS) == list(range(2, VERSION + 1)), "say what each format version needs"


def _version(cur: Any, params: dict[str, Any]) -> int:
    """The oldest format version that holds the namespace whole: a namespace without
    metadata is written as version 1, which every P-Mem that exports reads."""
    version = 1
    for candidate, sql in sorted(_NEEDS.items()):
        cur.execute(sql, params)
        if cur.fetchone()[0]:
            version = candidate
    return version


def _producer() -> str:
    try:
        return f"pmem {metadata.version('pmem')}"
    except metadata.PackageNotFoundError:  # a checkout run without being installed
        return "pmem"


def export_chunks(namespace: Namespace, *, progress: Progress | None = None,
                  batch: int = BATCH) -> Iterator[bytes]:
    """The export file as byte chunks (whole lines: the header, then a batch of records at a
    time). A generator: the snapshot opens at the first chunk and closes after the last (or
    when the consumer stops early)."""
    with _snapshot():
        params = {"ns": namespace.pk}
        counts: dict[str, int] = {}
        with connection.cursor() as cur:
            for record in RECORDS:
                cur.execute(_count(record), params)
                counts[record.type] = int(cur.fetchone()[0])
            version = _version(cur, params)
        header = Header(namespace=namespace.name, exported_at=timezone.now().isoformat(),
                        counts=counts, version=version, extra={"producer": _producer()})
        yield (json.dumps(header.as_dict(), ensure_ascii=False) + "\n").encode()
        total, done = sum(counts.values()), 0
        if progress is not None:
            progress(0, total)
        for record in RECORDS:
            if not counts[record.type]:
                continue
            with connection.chunked_cursor() as cur:
                cur.execute(_select(record, version), params)
                while rows := cur.fetchmany(batch):
                    yield "".join(row[0] + "\n" for row in rows).encode()
                    done += len(rows)
                    if progress is not None:
                        progress(done, total)


def namespace_export(namespace: Namespace, out: Sink, *,
                     progress: Progress | None = None) -> dict[str, int]:
    """Write ``namespace`` to ``out`` (a binary stream); returns the records written by type."""
    counts: dict[str, int] = {}
    first = True
    for chunk in export_chunks(namespace, progress=progress):
        if first:
            counts = json.loads(chunk)["counts"]
            first = False
        out.write(chunk)
    return counts
