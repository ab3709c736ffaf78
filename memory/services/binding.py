"""Server-side parameter binding for the write path's bulk statements.

Django's PostgreSQL backend binds parameters on the client by default: psycopg quotes every
value, and every element of an array parameter, into the SQL text in Python. The commit
path sends whole columns as arrays (one ``INSERT ... SELECT FROM unnest(...)`` per table), so
that quoting was a tenth of a commit. These statements instead go through a server-binding
cursor on the SAME connection and transaction, with ``%b`` placeholders: the arrays travel in
PostgreSQL's binary format, and each statement is prepared once per connection (parsed and
planned once). The cursor is wrapped by Django, so execute wrappers and the query log still
see every statement.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import psycopg
from django.conf import settings
from django.db import connection
from psycopg.adapt import Dumper
from psycopg.pq import Format


class _BoundCursor(psycopg.Cursor[Any]):
    """Prepares each statement on its first run, or never: behind a transaction-pooling
    PgBouncer, ``PMEM_PREPARED_READS=0``. Remembers the statement's text for Django's query
    log (psycopg does not keep it for a prepared execution)."""

    prepare = True
    binary_results: bool | None = None
    logged: Any = None

    def execute(self, query: Any, params: Any = None, *, prepare: bool | None = None,
                binary: bool | None = None) -> Any:
        self.logged = _Logged(query.encode() if isinstance(query, str) else query)
        return super().execute(query, params, prepare=self.prepare,
                               binary=self.binary_results if binary is None else binary)


class _Logged:
    __slots__ = ("query",)

    def __init__(self, query: bytes) -> None:
        self.query = query


class _LogView:
    """What Django's query log reads of a cursor (``_query.query``), for a bound cursor."""

    def __init__(self, cursor: _BoundCursor) -> None:
        self._cursor = cursor

    @property
    def _query(self) -> Any:
        return self._cursor.logged

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)

    def __iter__(self) -> Any:
        return iter(self._cursor)


@contextmanager
def bound_cursor(*, binary_results: bool | None = None) -> Iterator[Any]:
    """A Django cursor whose parameters are bound by the server (``%b``: binary), its
    statements prepared unless ``PMEM_PREPARED_READS`` is off. ``binary_results``: rows come
    back in binary too (no timestamp or number parsed from text)."""
    connection.ensure_connection()
    raw = _BoundCursor(connection.connection)
    raw.prepare = bool(settings.PMEM_PREPARED_READS)
    raw.binary_results = binary_results
    raw.adapters.register_dumper(Float4Array, _Float4ArrayDumper)
    # Django's own hook that wraps a driver cursor for the query log and execute wrappers;
    # private, so the stubs do not declare it.
    cursor = connection._prepare_cursor(_LogView(raw))  # type: ignore[attr-defined]
    try:
        yield cursor
    finally:
        cursor.close()


@contextmanager
def pipelined() -> Iterator[None]:
    """Statements whose results nobody reads go out back to back (psycopg's pipeline mode):
    ONE round trip to the server for all of them instead of one each, the same statements in
    the same order and transaction. A statement that fails raises when the block ends (or at
    the first result read inside it), as Django's error, so a deadlock is retried like any."""
    connection.ensure_connection()
    with connection.wrap_database_errors, connection.connection.pipeline():
        yield


class Float4Array:
    """Many vectors as ONE flat ``float4[]`` parameter, sent in binary: vector ``i`` (from 0)
    is ``(param)[i * dim + 1 : (i + 1) * dim]::vector`` in SQL. Formatting 384 floats as text
    per vector, and parsing them back in the server, was the dearest part of writing a moved
    cell."""

    def __init__(self, vectors: Sequence[Any], dim: int) -> None:
        self.dim = dim
        self.flat = (np.concatenate([np.asarray(v, dtype=np.float32).reshape(dim)
                                     for v in vectors])
                     if vectors else np.zeros(0, dtype=np.float32))


class _Float4ArrayDumper(Dumper):
    format = Format.BINARY
    oid = 1021  # float4[]

    def dump(self, obj: Float4Array) -> bytes:
        n = int(obj.flat.size)
        if n == 0:
            return struct.pack("!iii", 0, 0, _FLOAT4_OID)
        # PostgreSQL's binary array: header, then (length, big-endian value) per element.
        body = np.empty(n, dtype=[("len", ">i4"), ("val", ">f4")])
        body["len"] = 4
        body["val"] = obj.flat
        return struct.pack("!iiiii", 1, 0, _FLOAT4_OID, n, 1) + body.tobytes()


_FLOAT4_OID = 700


def vector_literal(vector: Sequence[float]) -> str:
    """pgvector's text form; 6 significant digits keep float32 cosines to ~1e-6.

    Hashing-embedder vectors are mostly zeros (a short text hits a few dozen of 384 slots):
    only their non-zero entries are formatted, which made the literal ~10x cheaper."""
    values = np.asarray(vector, dtype=np.float64)
    nonzero = np.flatnonzero(values)
    if len(nonzero) * 4 < len(values):
        parts = ["0"] * len(values)
        for i, x in zip(nonzero.tolist(), values[nonzero].tolist(), strict=True):
            parts[i] = f"{x:.6g}"
        return "[" + ",".join(parts) + "]"
    return "[" + ",".join(f"{x:.6g}" for x in values.tolist()) + "]"


def insert_rows(table: str, columns: Sequence[tuple[str, str]], rows: list[tuple[Any, ...]],
                ) -> None:
    """Insert ``rows`` with ONE statement: each column travels as one typed array."""
    if not rows:
        return
    names = ", ".join(name for name, _ in columns)
    arrays = ", ".join(f"%b::{kind}[]" for _, kind in columns)
    with bound_cursor() as cur:
        cur.execute(f"INSERT INTO {table} ({names}) SELECT * FROM unnest({arrays})",
                    [list(col) for col in zip(*rows, strict=True)])


def vector_slot(vectors: list[Any], vector: Any) -> int | None:
    """Append ``vector`` (if any) to a flat batch; its index there."""
    if vector is None:
        return None
    vectors.append(vector)
    return len(vectors) - 1
