"""The explorer's downloads, named as the pages name them (SPEC §11.5): a version is ``vN``, its
place in its key, and the global id is a column of its own; each row says why it is there (the
reason of the operation that made the version, and who retracted it and why). Streamed from a
server-side cursor, newest first (history) or by key (frontier)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.db.models import OuterRef, Subquery

from memory.models import Cell, Namespace, Tombstone, Version

from .log import LogFilters
from .shapes import EXPORT_CHUNK

HISTORY_DOWNLOAD_FIELDS = (
    "version", "value", "status", "valid_from", "valid_to", "support", "supersedes", "restores",
    "created_by_operation", "ordinal", "version_id", "reason", "actor", "retracted_by",
    "retraction_reason")
FRONTIER_DOWNLOAD_FIELDS = ("key", "value", "status", "version", "support", "updated_at",
                            "ordinal", "version_id", "reason", "actor")
LOG_DOWNLOAD_FIELDS = ("id", "created_at", "op", "requested", "key", "version", "value",
                       "actor", "method", "source", "reason", "observation_seq", "ordinal",
                       "version_id")


def _name(ordinal: int | None) -> str:
    return f"v{ordinal}" if ordinal else ""


def _tomb(field: str) -> Subquery:
    newest = Tombstone.objects.filter(version_id=OuterRef("pk")).order_by("-id")
    return Subquery(newest.values(f"operation__{field}")[:1])


def history_download(*, cell: Cell) -> Iterator[tuple[Any, ...]]:
    """Every version of ``cell``, newest first."""
    rows = (Version.objects.filter(cell=cell).order_by("-id")
            .annotate(tomb_actor=_tomb("actor"), tomb_reason=_tomb("reason"))
            .values_list("ordinal", "value", "status", "valid_from", "valid_to", "support",
                         "supersedes__ordinal", "restores__ordinal", "created_by_id", "id",
                         "created_by__reason", "created_by__actor", "tomb_actor", "tomb_reason")
            .iterator(chunk_size=EXPORT_CHUNK))
    for (ordinal, value, status, vf, vt, support, sup, res, op, vid, reason, actor, t_actor,
         t_reason) in rows:
        yield (_name(ordinal), value, status, vf, vt, support, _name(sup), _name(res), op,
               ordinal, vid, reason or "", actor or "", t_actor or "", t_reason or "")


def frontier_download(*, namespace: Namespace) -> Iterator[tuple[Any, ...]]:
    """Every headed cell, by key."""
    rows = (Cell.objects.filter(namespace=namespace, head__isnull=False).order_by("key")
            .values_list("key", "head__value", "head__status", "head__ordinal", "head__support",
                         "updated_at", "head_id", "head__created_by__reason",
                         "head__created_by__actor")
            .iterator(chunk_size=EXPORT_CHUNK))
    for key, value, status, ordinal, support, updated, vid, reason, actor in rows:
        yield (key, value, status, _name(ordinal), support, updated, ordinal, vid,
               reason or "", actor or "")


def log_download(*, namespace: Namespace, filters: LogFilters) -> Iterator[tuple[Any, ...]]:
    """The (filtered) log, newest first; a row without a value gives its version's value."""
    rows = (filters.queryset(namespace)
            .values_list("id", "created_at", "type", "requested", "key", "version__ordinal",
                         "value", "actor", "method", "source", "reason", "seq",
                         "version__value", "version_id")
            .iterator(chunk_size=EXPORT_CHUNK))
    for (op_id, at, op, requested, key, ordinal, value, actor, method, source, reason, seq,
         version_value, vid) in rows:
        yield (op_id, at, op, requested, key, _name(ordinal),
               value if value is not None else version_value, actor, method, source, reason,
               seq, ordinal, vid)

