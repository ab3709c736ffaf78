"""The first pass of an import: the whole file is checked before anything is written.

Format and version (the header), every record's fields and their kinds, the order (record
types in the order of :data:`schema.RECORDS`, ids rising within a type), the counts the header
announces, and every reference — columns and the ids inside payloads — to a record of the
file. A reference to a type not yet complete (a cell's head, a version's creating operation)
waits until that type is; every other is checked in batches. What it keeps: the ids of each
type (8 bytes a record), and the references still waiting.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from memory.domain import BIGINT_MAX
from memory.domain.admission import (
    Limits,
    Refused,
    check_facts,
    check_key,
    check_observation,
    check_source,
    check_value,
)
from memory.domain.metadata import MetadataRefused, clean_metadata

from ..admission import limits
from .payload import payload_refs
from .reading import ImportRefused, lines
from .schema import BY_TYPE, FORMAT, ORDER, RECORDS, VERSION, Field, Kind, Record, fields_for

#: References checked at a time, once their target type is complete.
REF_BATCH = 8192
#: What may name a record: every reference field, and the ids inside payloads.
LABELS = [*(f"{r.type}.{f.name}" for r in RECORDS for f in r.fields if f.ref),
          "operation.payload"]


@dataclass
class IdTable:
    """The ids of one record type, in file order; once complete, sorted with their positions."""

    values: array = field(default_factory=lambda: array("q"))
    complete: bool = False
    sorted: np.ndarray | None = None
    #: File position of each sorted id (None: the file's order is the sorted order).
    position: np.ndarray | None = None

    def finish(self, record: Record, first_line: int) -> None:
        ids = np.frombuffer(self.values, dtype=np.int64) if len(self.values) else \
            np.zeros(0, dtype=np.int64)
        if record.ids_ascend:
            self.sorted = ids  # the same memory as ``values``
        else:
            self.position = np.argsort(ids, kind="stable")
            self.sorted = ids[self.position]
            repeated = np.flatnonzero(self.sorted[1:] == self.sorted[:-1])
            if len(repeated):
                at = int(self.position[repeated[0] + 1])
                raise ImportRefused(first_line + at, f"{record.type} id"
                                    f" {int(self.sorted[repeated[0] + 1])} appears twice")
        self.complete = True

    def holds(self, wanted: np.ndarray) -> np.ndarray:
        assert self.sorted is not None
        if not len(self.sorted):
            return np.zeros(len(wanted), dtype=bool)
        at = np.minimum(np.searchsorted(self.sorted, wanted), len(self.sorted) - 1)
        return self.sorted[at] == wanted


@dataclass
class Pending:
    """References to one record type still to check: (id, line, what names it)."""

    ids: array = field(default_factory=lambda: array("q"))
    at: array = field(default_factory=lambda: array("q"))
    names: array = field(default_factory=lambda: array("B"))  # index in LABELS


@dataclass
class Checked:
    """What the check found: the header, the file's format version and every type's ids."""

    header: dict[str, Any]
    version: int
    ids: dict[str, IdTable]
    lines: int


def _header(raw: bytes) -> tuple[dict[str, Any], int]:
    try:
        header = json.loads(raw)
    except ValueError:
        raise ImportRefused(1, "not a P-Mem export: the first line is not JSON") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ImportRefused(1, f"not a P-Mem export: the first line must have format {FORMAT!r}")
    version = header.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ImportRefused(1, "the header's version must be a positive integer")
    if version > VERSION:
        raise ImportRefused(1, f"format version {version} is newer than this P-Mem reads"
                               f" (up to {VERSION}): upgrade P-Mem to import it")
    counts = header.get("counts")
    if not isinstance(counts, dict) or set(counts) != set(BY_TYPE) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts.values()):
        raise ImportRefused(1, "the header's counts must give a number for each record type:"
                               f" {', '.join(BY_TYPE)}")
    if counts["namespace"] != 1:
        raise ImportRefused(1, "the header must count exactly one namespace record")
    if not isinstance(header.get("namespace"), str):
        raise ImportRefused(1, "the header must name the namespace")
    return header, version


_TIME = "must be an ISO 8601 time with a zone"


def _int(value: Any) -> str | None:
    return None if type(value) is int and -BIGINT_MAX <= value <= BIGINT_MAX else "must be an integer"


def _str(value: Any) -> str | None:
    if type(value) is not str:
        return "must be a string"
    return "must not hold a NUL character" if "\x00" in value else None


def _time(value: Any) -> str | None:
    if type(value) is not str:
        return _TIME
    try:
        return None if datetime.fromisoformat(value).tzinfo is not None else _TIME
    except ValueError:
        return _TIME


def _bool(value: Any) -> str | None:
    return None if type(value) is bool else "must be true or false"


def _object(value: Any) -> str | None:
    return None if type(value) is dict else "must be a JSON object"


def _any(value: Any) -> str | None:
    return None


def _metadata(value: Any) -> str | None:
    try:
        clean_metadata(value)
    except MetadataRefused as refused:
        return f"must be metadata ({refused})"
    return None


_KINDS: dict[Kind, Callable[[Any], str | None]] = {
    Kind.INT: _int, Kind.STR: _str, Kind.TIME: _time, Kind.BOOL: _bool, Kind.OBJECT: _object,
    Kind.JSON: _any, Kind.METADATA: _metadata}


def validator(f: Field) -> Callable[[Any], str | None]:
    """Why a value is not a valid ``f``, or None."""
    kind = _KINDS[f.kind]
    choices = frozenset(f.choices)
    allowed = ", ".join(f.choices)

    def check(value: Any) -> str | None:
        if value is None:
            return None if f.null else "must not be null"
        problem = kind(value)
        if problem is None and choices and value not in choices:
            return f"must be one of {allowed}"
        return problem

    return check


def admit(kind: str, obj: dict[str, Any], limits: Limits) -> None:
    """What the API would refuse, the import refuses (SPEC §11.2): the same checks, with the
    same limits, on what each record carries (memory.domain.admission)."""
    if kind == "observation":
        check_observation(text=obj["text"], facts=obj["facts"], source=obj["source"],
                          limits=limits)
        extracted = obj["extracted"]
        if isinstance(extracted, dict) and isinstance(extracted.get("facts"), list):
            check_facts(extracted["facts"], limits, "extracted.facts")
    elif kind == "cell":
        check_key(obj["key"], limits, "key", canonical=True)
    elif kind == "alias":
        check_key(obj["alias"], limits, "alias", canonical=True)
    elif kind == "version":
        check_value(obj["value"], limits, "value", null=False)
    elif kind == "operation":
        check_value(obj["value"], limits, "value")
    elif kind == "trust":
        check_source(obj["source"], limits)


class Checker:
    """Feeds on the lines of a file; :meth:`finish` checks what only the end can tell."""

    def __init__(self, header: dict[str, Any], version: int) -> None:
        self.header, self.version = header, version
        self.counts: dict[str, int] = {r.type: 0 for r in RECORDS}
        self.ids: dict[str, IdTable] = {r.type: IdTable() for r in RECORDS}
        self.pending: dict[str, Pending] = {r.type: Pending() for r in RECORDS}
        self.first_line: dict[str, int] = {}
        self.current = -1  # index in RECORDS of the type being read
        self.last_id = 0
        self.last_key: Any = None
        self.expected = {r.type: {"type", *(("id",) if r.has_id else ()),
                                  *(f.name for f in fields_for(r, version))} for r in RECORDS}
        self.checks = {r.type: [(f.name, validator(f)) for f in fields_for(r, version)]
                       for r in RECORDS}
        self.limits = limits()
        self.refs = {r.type: [(f.name, f.ref, f"{r.type}.{f.name}")
                              for f in fields_for(r, version) if f.ref is not None]
                     for r in RECORDS}

    def feed(self, number: int, raw: bytes) -> None:
        try:
            obj = json.loads(raw)
        except ValueError as exc:
            raise ImportRefused(number, f"not valid JSON ({exc})") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
            raise ImportRefused(number, "a record must be a JSON object with a type")
        record = BY_TYPE.get(obj["type"])
        if record is None:
            raise ImportRefused(number, f"unknown record type {obj['type']!r}")
        self._place(number, record)
        self._fields(number, record, obj)
        try:
            admit(record.type, obj, self.limits)
        except Refused as refused:
            raise ImportRefused(number, f"{record.type}.{refused.field} {refused.message}"
                                        " (over the API's own limits)") from None
        self._order(number, record, obj)
        self._refs(number, record, obj)

    def _place(self, number: int, record: Record) -> None:
        index = ORDER[record.type]
        if index < self.current:
            raise ImportRefused(number, f"a {record.type} record after the"
                                        f" {RECORDS[self.current].type} records: records must"
                                        " come in the order of docs/export-format.md")
        while self.current < index:
            if self.current >= 0:
                self._complete(RECORDS[self.current], number, record.type)
            self.current += 1
            self.first_line[RECORDS[self.current].type] = number
            self.last_id, self.last_key = 0, None
        self.counts[record.type] += 1
        if self.counts[record.type] > self.header["counts"][record.type]:
            raise ImportRefused(number, f"more {record.type} records than the header counts"
                                        f" ({self.header['counts'][record.type]})")

    def _fields(self, number: int, record: Record, obj: dict[str, Any]) -> None:
        names = set(obj)
        expected = self.expected[record.type]
        if names != expected:
            extra, missing = sorted(names - expected), sorted(expected - names)
            what = (f"unknown field {extra[0]!r}" if extra else f"missing field {missing[0]!r}")
            raise ImportRefused(number, f"{record.type}: {what}")
        for name, valid in self.checks[record.type]:
            problem = valid(obj[name])
            if problem:
                raise ImportRefused(number, f"{record.type}.{name} {problem}")

    def _order(self, number: int, record: Record, obj: dict[str, Any]) -> None:
        if record.has_id:
            rid = obj["id"]
            if not isinstance(rid, int) or isinstance(rid, bool) or not 0 < rid <= BIGINT_MAX:
                raise ImportRefused(number, f"{record.type}.id must be a positive integer")
            if record.ids_ascend and rid <= self.last_id:
                raise ImportRefused(number, f"{record.type} id {rid} after id {self.last_id}:"
                                            " ids must rise (the file was reordered or edited)")
            self.last_id = rid
            self.ids[record.type].values.append(rid)
        if record.ascending:
            key = obj[record.ascending]
            if self.last_key is not None and key <= self.last_key:
                raise ImportRefused(number, f"{record.type}.{record.ascending} {key!r} after"
                                            f" {self.last_key!r}: it must rise")
            self.last_key = key
        if record.type == "version" and obj["supersedes"] is not None \
                and obj["supersedes"] >= obj["id"]:
            raise ImportRefused(number, "version.supersedes must name an older version")

    def _refs(self, number: int, record: Record, obj: dict[str, Any]) -> None:
        for name, target, label in self.refs[record.type]:
            if obj[name] is not None:
                self._ref(target, obj[name], number, label)
        if record.type == "operation":
            for target, rid in payload_refs(obj["payload"]):
                self._ref(target, rid, number, "operation.payload")

    def _ref(self, target: str, rid: int, number: int, name: str) -> None:
        pending = self.pending[target]
        pending.ids.append(rid)
        pending.at.append(number)
        pending.names.append(LABELS.index(name))
        if self.ids[target].complete and len(pending.ids) >= REF_BATCH:
            self._resolve(target)

    def _resolve(self, target: str) -> None:
        pending = self.pending[target]
        if not len(pending.ids):
            return
        wanted = np.frombuffer(pending.ids, dtype=np.int64)
        missing = np.flatnonzero(~self.ids[target].holds(wanted))
        if len(missing):
            lines_at = np.frombuffer(pending.at, dtype=np.int64)[missing]
            first = int(missing[np.argmin(lines_at)])
            raise ImportRefused(int(pending.at[first]),
                                f"{LABELS[pending.names[first]]} names {target}"
                                f" {int(wanted[first])},"
                                " which the file does not hold")
        self.pending[target] = Pending()

    def _complete(self, record: Record, number: int, next_type: str | None = None) -> None:
        """No more ``record`` records: as many as the header counts must have come."""
        found, due = self.counts[record.type], self.header["counts"][record.type]
        if found != due:
            where = (f"{next_type} records begin where" if next_type else "the file ends where")
            raise ImportRefused(number, f"{where} {due} {record.type} records were due; found"
                                        f" {found}: the file was cut short, reordered or edited")
        self.ids[record.type].finish(record, self.first_line.get(record.type, number))
        self._resolve(record.type)

    def finish(self, last: int) -> Checked:
        while self.current < len(RECORDS) - 1:
            if self.current >= 0:
                self._complete(RECORDS[self.current], last + 1)
            self.current += 1
            self.first_line.setdefault(RECORDS[self.current].type, last + 1)
        self._complete(RECORDS[self.current], last + 1)
        for record in RECORDS:
            self._resolve(record.type)
        return Checked(self.header, self.version, self.ids, last)


def check(path: Path, progress: Any = None) -> Checked:
    """Check the whole file at ``path``; raises :class:`ImportRefused` at the first fault."""
    checker: Checker | None = None
    last = 0
    total = 0
    for number, raw in lines(path):
        last = number
        if checker is None:
            header, version = _header(raw)
            checker = Checker(header, version)
            total = sum(header["counts"].values())
            continue
        checker.feed(number, raw)
        if progress is not None and number % 10000 == 0:
            progress(number - 1, total)
    if checker is None:
        raise ImportRefused(1, "the file is empty")
    if progress is not None:
        progress(total, total)
    return checker.finish(last)
