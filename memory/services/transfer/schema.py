"""The export format, one record schema per table (docs/export-format.md).

Everything the exporter writes, the checker checks and the importer writes back is declared
here: a record type per table, in the order of the file, and its fields — the name in the file,
the column, the kind of value, whether it may be null, which record type an id names. A new
column is one more :class:`Field` (with ``since`` set to the format version that added it, and
the value an older file gives it); nothing else changes.

Ids in a file are the exporting instance's. The importer gives every record a new id from its
own sequences, in the order of the old ones (so every "newest first" and every "oldest first"
answers the same), and rewrites every reference — columns and the ids inside an operation's
payload (ids are this instance's own).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from memory.domain import LOG_TYPES, EvidenceState, Method, Status

FORMAT = "pmem-export"
#: The format version this code writes. It reads every version up to this one. 2: versions
#: carry their fact's ``metadata`` (a version-1 file's versions have none). 3: observations
#: carry their chat session's ``messages``. 4: versions carry ``expires_at`` (and with it the
#: ``expired`` status and the ``expire`` operation).
VERSION = 4


class Kind(StrEnum):
    INT = "int"
    STR = "str"
    TIME = "time"  # ISO 8601 with a zone, microseconds kept
    JSON = "json"
    OBJECT = "object"  # a JSON object
    METADATA = "metadata"  # a flat object of strings, numbers and booleans
    BOOL = "bool"


@dataclass(frozen=True)
class Field:
    """One value of a record. ``column`` is where it lives (None: the file carries it for the
    importer, the table has no such column); ``sql`` what the exporter selects (default: the
    column of the row ``t``)."""

    name: str
    kind: Kind
    null: bool = False
    ref: str | None = None  # the record type whose id this is
    column: str | None = ""  # "" → the same as ``name``
    sql: str = ""
    choices: tuple[str, ...] = ()
    since: int = 1  # the format version that added it
    default: Any = None  # what a file older than ``since`` gives it

    @property
    def db_column(self) -> str | None:
        if self.column == "":
            return f"{self.name}_id" if self.ref else self.name
        return self.column

    @property
    def select(self) -> str:
        return self.sql or f"t.{self.db_column}"


@dataclass(frozen=True)
class Record:
    """One table's records. ``source`` is the FROM clause of the export, with ``%(ns)s`` the
    namespace id; ``order`` the field records are written (and must come) in the order of."""

    type: str
    table: str
    fields: tuple[Field, ...]
    source: str
    order: str = "id"
    #: Records carry their id (every table but the namespace row and trust levels).
    has_id: bool = True
    #: A field whose values must strictly increase through the file (besides ``id``).
    ascending: str = ""
    #: Ids increase through the file (False: the file is in ``ascending`` order instead).
    ids_ascend: bool = True

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)


def _f(name: str, kind: Kind, **kw: Any) -> Field:
    return Field(name, kind, **kw)


_STATUSES = tuple(s.value for s in Status)
_TIMES = {"created_at": _f("created_at", Kind.TIME)}
_NS = "FROM {table} t WHERE t.namespace_id = %(ns)s"
# Tables without a namespace column are reached through the cell or the version they hang on.
_BY_CELL = "FROM {table} t JOIN memory_cell c ON c.id = t.cell_id WHERE c.namespace_id = %(ns)s"
_BY_VERSION = ("FROM {table} t JOIN memory_version v ON v.id = t.version_id"
               " WHERE v.namespace_id = %(ns)s")


def _record(type_: str, table: str, fields: Sequence[Field], source: str = _NS,
            **kw: Any) -> Record:
    return Record(type_, table, tuple(fields), source.format(table=table), **kw)


RECORDS: tuple[Record, ...] = (
    _record("namespace", "memory_namespace", [
        _f("name", Kind.STR), _f("next_seq", Kind.INT), _TIMES["created_at"],
    ], "FROM {table} t WHERE t.id = %(ns)s", order="name", has_id=False),
    # Trust levels (SPEC §8) travel; tokens, their source bindings, members and sessions never.
    _record("trust", "memory_sourcetrust", [
        _f("source", Kind.STR), _f("level", Kind.INT),
    ], order='source COLLATE "C"', has_id=False, ascending="source"),
    _record("observation", "memory_evidence", [
        _f("seq", Kind.INT), _f("text", Kind.STR), _f("facts", Kind.JSON, null=True),
        _f("source", Kind.STR), _f("observed_at", Kind.TIME, null=True),
        _f("received_at", Kind.TIME),
        # A chat session's turns as sent (its text is their transcript).
        _f("messages", Kind.JSON, null=True, since=3),
        # The hex SHA-256 of the client's idempotency key (never the key: SPEC §6).
        _f("idempotency_key", Kind.STR, null=True), _f("actor", Kind.STR),
        _f("state", Kind.STR, choices=tuple(s.value for s in EvidenceState)),
        _f("error", Kind.STR),
        # The extraction result, without the cached vectors (an embedder's, not the memory's).
        _f("extracted", Kind.JSON, null=True,
           sql="CASE WHEN jsonb_typeof(t.extracted) = 'object' THEN t.extracted - 'vectors'"
               " ELSE t.extracted END"),
        _f("committed_at", Kind.TIME, null=True),
        _f("chat_calls", Kind.INT), _f("embed_calls", Kind.INT),
        _f("prompt_tokens", Kind.INT), _f("completion_tokens", Kind.INT),
        # Vectors are not exported: the importer embeds what the exporter had embedded.
        _f("embedded", Kind.BOOL, column=None, sql="t.embedding IS NOT NULL"),
    ], order="seq", ascending="seq", ids_ascend=False),
    _record("cell", "memory_cell", [
        _f("key", Kind.STR), _f("head", Kind.INT, null=True, ref="version"),
        _TIMES["created_at"], _f("updated_at", Kind.TIME), _f("version_count", Kind.INT),
        # The text its ``key: value`` vector was computed from ("" = none): the importer
        # computes the vector again from it.
        _f("embedded_text", Kind.STR),
    ]),
    _record("alias", "memory_keyalias", [
        _f("cell", Kind.INT, ref="cell"), _f("alias", Kind.STR), _TIMES["created_at"],
    ]),
    _record("version", "memory_version", [
        _f("cell", Kind.INT, ref="cell"), _f("value", Kind.STR),
        _f("status", Kind.STR, choices=_STATUSES),
        _f("valid_from", Kind.TIME), _f("valid_to", Kind.TIME, null=True),
        _f("support", Kind.INT), _f("created_by", Kind.INT, null=True, ref="operation"),
        _f("supersedes", Kind.INT, null=True, ref="version"),
        _f("alternative_of", Kind.INT, null=True, ref="version"),
        _f("restores", Kind.INT, null=True, ref="version"),
        _TIMES["created_at"], _f("ordinal", Kind.INT),
        _f("metadata", Kind.METADATA, null=True, since=2),
        _f("expires_at", Kind.TIME, null=True, since=4),
    ]),
    _record("operation", "memory_operation", [
        _f("cell", Kind.INT, null=True, ref="cell"), _f("key", Kind.STR),
        _f("op", Kind.STR, column="type", choices=tuple(LOG_TYPES)),
        _f("requested", Kind.STR),
        _f("actor", Kind.STR), _f("evidence", Kind.INT, null=True, ref="observation"),
        _f("seq", Kind.INT, null=True), _f("version", Kind.INT, null=True, ref="version"),
        _f("value", Kind.STR, null=True),
        # Its ids (version, head_before, head_after, effects' *_id, cause, undoes) are
        # references too: checked and rewritten (memory.services.transfer.payload).
        _f("payload", Kind.OBJECT), _f("reason", Kind.STR), _f("raw_output", Kind.STR),
        _f("prompt_tokens", Kind.INT), _f("completion_tokens", Kind.INT),
        _TIMES["created_at"],
        _f("method", Kind.STR, choices=tuple(m.value for m in Method)),
        _f("source", Kind.STR),
    ]),
    _record("span", "memory_versionspan", [
        _f("cell", Kind.INT, ref="cell"), _f("version", Kind.INT, ref="version"),
        _f("status", Kind.STR, choices=_STATUSES),
        _f("since", Kind.TIME), _f("until", Kind.TIME, null=True),
    ], _BY_CELL),
    _record("support", "memory_supportedge", [
        _f("version", Kind.INT, ref="version"),
        _f("evidence", Kind.INT, null=True, ref="observation"),
        _f("operation", Kind.INT, ref="operation"),
    ], _BY_VERSION),
    _record("tombstone", "memory_tombstone", [
        _f("version", Kind.INT, ref="version"), _f("operation", Kind.INT, ref="operation"),
        _TIMES["created_at"],
    ], _BY_VERSION),
    # That an erase happened, by whom and when, and how much it removed — not which key
    # (an erased key never leaves the instance, not even its name).
    _record("erasure", "memory_eraseaudit", [
        _f("actor", Kind.STR), _f("versions_erased", Kind.INT),
        _f("evidence_redacted", Kind.INT), _TIMES["created_at"],
    ]),
)
BY_TYPE: dict[str, Record] = {r.type: r for r in RECORDS}
ORDER: dict[str, int] = {r.type: i for i, r in enumerate(RECORDS)}


@dataclass
class Header:
    """The first line of a file."""

    namespace: str
    exported_at: str
    counts: dict[str, int]
    version: int = VERSION
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": self.version, "namespace": self.namespace,
                "exported_at": self.exported_at, "counts": self.counts, **self.extra}


def fields_for(record: Record, version: int) -> tuple[Field, ...]:
    """The fields a file of format ``version`` carries for ``record``."""
    return tuple(f for f in record.fields if f.since <= version)


#: Columns of an exported table that the file does not carry: the importer sets them (the new
#: namespace, an id the file does not need), computes them (vectors, index flags) or leaves
#: them empty (a task's lease on the old instance: here no task holds an imported observation,
#: so the sweep queues the unsettled ones; the digest of the request an idempotency key was
#: first used for: a key reused after the import replays, as for observations recorded before
#: digests were kept). The embedder a namespace records is this instance's (the
#: importer embeds every row), and the cells' words are written after them (derived, never trusted from a file).
COMPUTED: dict[str, tuple[str, ...]] = {
    "memory_namespace": ("id", "embedder", "reembed"),
    "memory_sourcetrust": ("id", "namespace_id"),
    # extract_text steers an extraction not done yet (an exported observation is settled,
    # or is extracted again on import as the importer's default says).
    "memory_evidence": ("namespace_id", "embedding", "lease_until", "request_digest",
                        "extract_text"),
    "memory_cell": ("namespace_id", "embedding", "key_embedding", "vector_stale", "terms",
                    "embed_pending"),
    "memory_keyalias": ("namespace_id",),
    "memory_version": ("namespace_id",),
    "memory_operation": ("namespace_id",),
    "memory_eraseaudit": ("namespace_id", "key", "vacuumed_at"),
}
#: Tables of the app that are never exported, and why. A new table must be named here or get
#: a record type (tests/services/test_transfer_schema.py fails until it is).
NEVER: dict[str, str] = {
    "memory_apitoken": "tokens never leave an instance: the import makes a new one",
    "memory_membership": "people and their passwords are the instance's",
    "memory_auditentry": "who could reach the namespace on the old instance (tokens, members)",
    "memory_frontiervector": "derived: the import indexes the cells' vectors again",
    "memory_namespacedeletion": "the instance's record of namespaces deleted, none of which "
                                "is the one exported",
    "memory_changeevent": "the change feed is the instance's: its cursors and subscribers are "
                          "this instance's, and an imported namespace's feed starts at its "
                          "import (README, Change events)",
    "memory_changecounter": "the change feed's cursor, with the feed",
    "memory_webhookendpoint": "a subscriber of this instance's feed, with a secret the import "
                              "must not carry: the new instance's admin makes its own",
    "memory_webhookdelivery": "the delivery log of those endpoints",
}

assert all(f.name not in ("type", "id") for r in RECORDS for f in r.fields), \
    "'type' and 'id' are the record's own members"
