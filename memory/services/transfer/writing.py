"""The second pass of an import: every record written with its new id, in one transaction.

Ids come from this instance's sequences up front, as many as the file holds of each type,
and are handed out in the order of the old ones, so every reference is known before its
target is written (the foreign keys are checked at commit, or — when the role may — not at
all, the first pass having checked every reference). Rows go in a batch at a time with ONE
``INSERT ... SELECT FROM unnest(...)`` per batch, each column one binary array (no per-row quoting).
Vectors are computed here from the texts the exporter had embedded, with this instance's
embedder, and the cells go straight into the frontier index: when the transaction commits,
the namespace is complete and indexed (a half-imported namespace is never read).
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import numpy as np
from django.db import DatabaseError, connection, transaction

from memory.domain.render import evidence_text, key_text
from memory.llm.embedding import embedder_from_settings
from memory.models import EMBED_DIM

from ..binding import Float4Array, bound_cursor
from .checking import Checked, IdTable
from .payload import remap_extracted, remap_facts, remap_payload, remap_reason
from .schema import RECORDS, Field, Kind, Record, fields_for

BATCH = 2000
ALLOCATE = 100_000  # ids taken from a sequence per statement
_SQL_TYPES = {Kind.INT: "bigint", Kind.STR: "text", Kind.TIME: "timestamptz",
              Kind.JSON: "jsonb", Kind.OBJECT: "jsonb", Kind.METADATA: "jsonb",
              Kind.BOOL: "bool"}
_WITH_NAMESPACE = {"memory_sourcetrust", "memory_evidence", "memory_cell", "memory_keyalias",
                   "memory_version", "memory_operation", "memory_eraseaudit"}


class IdMap:
    """Old ids of one type → new ones: the k-th smallest old id gets the k-th smallest new id
    (for observations, in seq order)."""

    def __init__(self, table: IdTable, new: np.ndarray) -> None:
        assert table.sorted is not None
        self.sorted = table.sorted
        # The new id of each sorted old id (in file order already, unless observations).
        self.new_sorted = new if table.position is None else new[table.position]
        # Views, not copies: bisect reads Python ints from them (8 bytes an id, once).
        self._old = memoryview(np.ascontiguousarray(self.sorted).data)
        self._new = memoryview(np.ascontiguousarray(self.new_sorted).data)

    def one(self, old: int) -> int:
        at = bisect_left(self._old, old)
        if at == len(self._old) or self._old[at] != old:
            raise KeyError(old)
        return self._new[at]

    def known(self, old: int) -> int | None:
        try:
            return self.one(old)
        except (KeyError, OverflowError):
            return None

    def column(self, values: list[int | None]) -> list[int | None]:
        """Many ids at once (None stays None)."""
        raw = np.array([0 if v is None else v for v in values], dtype=np.int64)
        mapped = self.new_sorted[np.searchsorted(self.sorted, raw)] if len(self.sorted) else raw
        return [None if v is None else int(m) for v, m in zip(values, mapped, strict=True)]


def allocate(checked: Checked) -> dict[str, IdMap]:
    """As many new ids of each type as the file holds, from this instance's sequences."""
    maps: dict[str, IdMap] = {}
    with connection.cursor() as cur:
        for record in RECORDS:
            if not record.has_id:
                continue
            n = len(checked.ids[record.type].values)
            new = np.empty(n, dtype=np.int64)
            for start in range(0, n, ALLOCATE):  # a bounded result at a time
                size = min(ALLOCATE, n - start)
                cur.execute("SELECT nextval(pg_get_serial_sequence(%s, 'id'))"
                            " FROM generate_series(1, %s)", [record.table, size])
                new[start:start + size] = [r[0] for r in cur.fetchall()]
            new.sort()
            maps[record.type] = IdMap(checked.ids[record.type], new)
    return maps


@contextmanager
def without_fk_triggers() -> Iterator[None]:
    """Every reference was checked by the first pass: skip the row-by-row foreign-key checks
    at commit when the role may (as pg_restore does: a million deferred
    checks take minutes). Another role keeps them."""
    with connection.cursor() as cur:
        try:
            with transaction.atomic():
                cur.execute("SET LOCAL session_replication_role = replica")
            bypass = True
        except DatabaseError:
            bypass = False
        yield
        # Only after success: a failed write is rolled back, and the setting with it.
        if bypass:
            cur.execute("SET LOCAL session_replication_role = origin")


def _vectors(texts: list[str]) -> list[Any]:
    embedder = embedder_from_settings()
    arrays = getattr(embedder, "embed_arrays", None)
    return list(arrays(texts)) if arrays is not None else embedder.embed(texts)


class TableWriter:
    """Buffers one type's rows and writes them a batch at a time."""

    def __init__(self, record: Record, version: int, namespace_id: int,
                 maps: dict[str, IdMap]) -> None:
        self.record, self.namespace_id, self.maps = record, namespace_id, maps
        self.fields = [f for f in fields_for(record, version) if f.db_column is not None]
        self.defaults = [f for f in record.fields if f.since > version and f.db_column]
        self.rows: list[dict[str, Any]] = []
        self.columns = ([("id", "bigint")] if record.has_id else []) + (
            [("namespace_id", "bigint")] if record.table in _WITH_NAMESPACE else []) + [
            (f.db_column or "", _SQL_TYPES[f.kind]) for f in self.fields + self.defaults]
        self.sql = ""

    def add(self, obj: dict[str, Any]) -> None:
        self.rows.append(obj)
        if len(self.rows) >= BATCH:
            self.flush()

    def flush(self) -> None:
        if not self.rows:
            return
        rows, self.rows = self.rows, []
        arrays = self._arrays(rows)
        extra_columns, extra_values = self._computed(rows)
        self._insert(arrays, extra_columns, extra_values)
        self._after(rows)

    def _arrays(self, rows: list[dict[str, Any]]) -> list[list[Any]]:
        out: list[list[Any]] = []
        if self.record.has_id:
            out.append(self.maps[self.record.type].column([r["id"] for r in rows]))
        if self.record.table in _WITH_NAMESPACE:
            out.append([self.namespace_id] * len(rows))
        for f in self.fields:
            out.append(self._values(f, rows))
        for f in self.defaults:
            out.append([f.default] * len(rows))
        return out

    def _values(self, f: Field, rows: list[dict[str, Any]]) -> list[Any]:
        values = [r[f.name] for r in rows]
        if f.ref is not None:
            return self.maps[f.ref].column(values)
        if f.kind == Kind.TIME:
            return [None if v is None else datetime.fromisoformat(v) for v in values]
        if f.kind in (Kind.JSON, Kind.OBJECT, Kind.METADATA):
            convert = _JSON_FIELDS.get((self.record.type, f.name))
            if convert is not None:
                values = [convert(self, r) for r in rows]
            return [None if v is None else json.dumps(v, ensure_ascii=False) for v in values]
        if (self.record.type, f.name) == ("operation", "reason"):
            return [self._reason(r) for r in rows]
        return values

    def _reason(self, row: dict[str, Any]) -> str:
        return remap_reason(row["reason"], row["payload"], self._payload(row))

    def _payload(self, row: dict[str, Any]) -> dict[str, Any]:
        # Remapped once per row, for the payload column and for the reason that quotes it.
        cached = row.get("\0payload")
        if cached is None:
            cached = row["\0payload"] = remap_payload(row["payload"], self._one)
        return cached

    def _one(self, target: str, old: int) -> int:
        return self.maps[target].one(old)

    def _facts(self, row: dict[str, Any]) -> Any:
        return remap_facts(row["facts"], self.maps["version"].known)

    def _extracted(self, row: dict[str, Any]) -> Any:
        return remap_extracted(row["extracted"], self.maps["version"].known)

    # --- what the file does not carry -------------------------------------------------------

    def _computed(self, rows: list[dict[str, Any]]) -> tuple[list[tuple[str, str]], list[Any]]:
        table = self.record.table
        if table == "memory_evidence":
            texts = [evidence_text(r["text"], r["facts"]) if r["embedded"] else None
                     for r in rows]
            return [("embedding", "vector")], [self._vector_column(texts)]
        if table == "memory_cell":
            texts = [r["embedded_text"] or None for r in rows]
            keys = [key_text(r["key"]) for r in rows]
            return ([("embedding", "vector"), ("key_embedding", "vector"),
                     ("vector_stale", "bool")],
                    [self._vector_column(texts), self._vector_column(keys), [False] * len(rows)])
        if table == "memory_eraseaudit":
            now = datetime.now().astimezone()
            # Nothing erased was ever written here: no dead tuple to vacuum away.
            return [("key", "text"), ("vacuumed_at", "timestamptz")], [[""] * len(rows),
                                                                       [now] * len(rows)]
        return [], []

    @staticmethod
    def _vector_column(texts: Sequence[str | None]) -> tuple[Float4Array, list[int | None]]:
        wanted = [t for t in texts if t is not None]
        vectors = _vectors(wanted) if wanted else []
        slots, n = [], 0
        for t in texts:
            slots.append(None if t is None else n)
            n += t is not None
        return Float4Array(vectors, EMBED_DIM), slots

    def _insert(self, arrays: list[list[Any]], extra_columns: list[tuple[str, str]],
                extra_values: list[Any]) -> None:
        if not self.sql:
            self.sql = self._statement(extra_columns)
        params: dict[str, Any] = {f"c{i}": values for i, values in enumerate(arrays)}
        for (column, kind), value in zip(extra_columns, extra_values, strict=True):
            if kind == "vector":
                params[f"v_{column}"], params[f"s_{column}"] = value
            else:
                params[f"x_{column}"] = value
        with bound_cursor() as cur:
            cur.execute(self.sql, params)

    def _statement(self, extra: list[tuple[str, str]]) -> str:
        """``INSERT ... SELECT FROM unnest(...)``: a binary array per column; a vector column
        is one flat float4 array and, per row, the slot of its vector (NULL: none)."""
        names = [c for c, _ in self.columns]
        unnest = [f"%(c{i})b::{kind}[]" for i, (_, kind) in enumerate(self.columns)]
        aliases = [f"c{i}" for i in range(len(self.columns))]
        selects = [f"u.c{i}" for i in range(len(self.columns))]
        for column, kind in extra:
            names.append(column)
            if kind == "vector":
                unnest.append(f"%(s_{column})b::int[]")
                aliases.append(f"s_{column}")
                selects.append(f"(%(v_{column})b::float4[])[u.s_{column} * {EMBED_DIM} + 1 :"
                               f" (u.s_{column} + 1) * {EMBED_DIM}]::vector")
            else:
                unnest.append(f"%(x_{column})b::{kind}[]")
                aliases.append(f"x_{column}")
                selects.append(f"u.x_{column}")
        return (f"INSERT INTO {self.record.table} ({', '.join(names)})"
                f" SELECT {', '.join(selects)} FROM unnest({', '.join(unnest)})"
                f" AS u({', '.join(aliases)})")

    def _after(self, rows: list[dict[str, Any]]) -> None:
        if self.record.table != "memory_cell":
            return
        ids = self.maps["cell"].column([r["id"] for r in rows])
        with bound_cursor() as cur:
            cur.execute("INSERT INTO memory_frontiervector (cell_id, namespace_id, embedding)"
                        " SELECT id, namespace_id, embedding FROM memory_cell"
                        " WHERE id = ANY(%b::bigint[]) AND head_id IS NOT NULL"
                        " AND embedding IS NOT NULL", [ids])


_JSON_FIELDS: dict[tuple[str, str], Callable[[TableWriter, dict[str, Any]], Any]] = {
    ("operation", "payload"): TableWriter._payload,
    ("observation", "facts"): TableWriter._facts,
    ("observation", "extracted"): TableWriter._extracted,
}


def writers(checked: Checked, namespace_id: int, maps: dict[str, IdMap]
            ) -> dict[str, TableWriter]:
    return {r.type: TableWriter(r, checked.version, namespace_id, maps)
            for r in RECORDS if r.type != "namespace"}

