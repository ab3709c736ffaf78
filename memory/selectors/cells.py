"""A cell: the point read, the materialized cell with its alternatives and newest history, the
cell now or as of a past time, pages of cells, and the frontier as of T (SPEC §7, §9, §10).

Every read here costs the same whatever the length of a key's history: the history's newest
page comes from :mod:`memory.selectors.history`, counts from ``Cell.version_count`` or the
status spans, never from reading the versions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg
from django.conf import settings
from django.db import connection
from django.db.models import F, Func, JSONField, Q, QuerySet, Value
from django.db.models.functions import Left

from memory.domain import (
    HEAD_STATUSES,
    BadParameter,
    CellStatus,
    Status,
    normalize_key,
    same_value,
    vocabulary,
)
from memory.domain.metadata import Metadata
from memory.domain.render import CellText, ClosedVersion, render_cell
from memory.models import Cell, KeyAlias, Namespace, SupportEdge, Version

from .history import (
    HISTORY_DEFAULT,
    HISTORY_MAX,
    Entry,
    alternatives,
    count_as_of,
    cursor_for,
    first_pages,
    head_as_of,
    history_page,
    support_as_of,
)
from .shapes import cell_status, stored_json

#: Characters of a supporting text a cell's support disclosure reads: it renders 60 of them
#: with whitespace collapsed, so only a text opening with hundreds of blanks could differ.
SNIPPET_SOURCE_CHARS = 400
#: Aliases the explorer's cell head lists (a key with more shows these).
HEAD_ALIASES = 20
#: The columns a cell row holds that no read here shows: its vectors stay in the database
#: (a page of cells would otherwise carry kilobytes of floats per row).
VECTOR_COLUMNS = ("embedding", "key_embedding", "embedded_text", "terms")

_HEAD_IN = ", ".join(f"'{s}'" for s in sorted(HEAD_STATUSES))


def cell_lookup(*, namespace: Namespace, key: str) -> Cell | None:
    """The cell a key names, with its head: by canonical key, else by a registered alias. One
    index probe, two for an alias."""
    norm = normalize_key(key)
    cells = Cell.objects.select_related("head").defer(*VECTOR_COLUMNS)
    cell = cells.filter(namespace=namespace, key=norm).first()
    if cell is None:
        cell = cells.filter(namespace=namespace, aliases__alias=norm).first()
    return cell


def cell_aliases(cell: Cell, limit: int | None = None) -> list[str]:
    """The cell's aliases, oldest first (one statement)."""
    qs = KeyAlias.objects.filter(cell=cell).order_by("id").values_list("alias", flat=True)
    return list(qs[:limit] if limit is not None else qs)


@dataclass(frozen=True)
class CellValue:
    key: str
    value: str | None
    status: str  # a CellStatus
    version: int | None
    support: int


# The point read: one round trip on the unique index (namespace, key) and the version's primary
# key, whatever the cell's history. A key that is not canonical costs a second query, through
# the alias index. (One UNION ALL of both branches was measured: its planning alone cost as
# much as the round trip.)
_CELL_VALUE_SQL = (
    "SELECT c.key, v.id, v.value, v.status, v.support FROM memory_cell c"
    " LEFT JOIN memory_version v ON v.id = c.head_id WHERE c.namespace_id = %s AND c.key = %s")
_ALIAS_VALUE_SQL = (
    "SELECT c.key, v.id, v.value, v.status, v.support FROM memory_keyalias a"
    " JOIN memory_cell c ON c.id = a.cell_id LEFT JOIN memory_version v ON v.id = c.head_id"
    " WHERE a.namespace_id = %s AND a.alias = %s")


def cell_value(*, namespace: Namespace | int, key: str) -> CellValue | None:
    """The current value of one key (canonical, else an alias): the point read, one query."""
    ns_id = namespace if isinstance(namespace, int) else namespace.pk
    norm = normalize_key(key)
    if settings.PMEM_PREPARED_READS:
        # A server-side prepared statement skips planning the join on every call (the point
        # read is then closer to a bare primary-key SELECT). Django's cursors bind
        # client-side and cannot prepare, so this uses a server-binding driver cursor.
        connection.ensure_connection()
        with psycopg.Cursor(connection.connection) as raw:  # binds on the server: can prepare
            row = raw.execute(_CELL_VALUE_SQL, (ns_id, norm), prepare=True).fetchone()
            if row is None:
                row = raw.execute(_ALIAS_VALUE_SQL, (ns_id, norm), prepare=True).fetchone()
    else:
        with connection.cursor() as cur:
            cur.execute(_CELL_VALUE_SQL, [ns_id, norm])
            row = cur.fetchone()
            if row is None:
                cur.execute(_ALIAS_VALUE_SQL, [ns_id, norm])
                row = cur.fetchone()
    if row is None:
        return None
    cell_key, version, value, status, support = row
    return CellValue(cell_key, value,
                     vocabulary.cell_status(status if version is not None else None),
                     version, support or 0)


@dataclass(frozen=True)
class CellDetail:
    key: str
    value: str | None
    status: str  # a CellStatus
    version: int | None
    support: int
    alternatives: list[dict[str, Any]] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)  # newest first
    aliases: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    updated_at: datetime | None = None
    history_total: int = 0  # versions in the whole history (``history`` is its newest page)
    history_next: str | None = None  # the cursor of the next page (history_page)

    def text(self) -> CellText:
        return CellText(
            key=self.key, value=self.value, status=self.status, support=self.support,
            sources=tuple(self.sources), alternatives=tuple(a["value"] for a in self.alternatives),
            history=tuple(ClosedVersion(h["value"], h["status"]) for h in self.history
                          if h["status"] not in HEAD_STATUSES and h["status"] != Status.ALTERNATIVE),
        )

    def render(self, disclose: Iterable[str] = ()) -> str:
        return render_cell(self.text(), disclose)


def cell_detail(*, namespace: Namespace, key: str, sources: int = 3,
                history: int = HISTORY_DEFAULT) -> CellDetail | None:
    """The materialized cell (SPEC §7) with its alternatives and the newest ``history``
    entries of its history (SPEC §10: never the whole of it; ``history_total`` and
    ``history_next`` say what is left). Five queries whatever the history's length."""
    cell = cell_lookup(namespace=namespace, key=key)
    if cell is None:
        return None
    head = cell.head
    state = cell_state(cell, history=history)
    aliases = cell_aliases(cell)
    snippets: list[str] = []
    if head is not None:
        # Rendered as 60-character snippets (render_cell): the head of each text is enough.
        snippets = [t for t in SupportEdge.objects.filter(version=head, evidence__isnull=False)
                    .order_by("-id").values_list(Left("evidence__text", SNIPPET_SOURCE_CHARS),
                                                 flat=True)[:sources] if t]
    return CellDetail(
        key=cell.key, value=head.value if head else None, status=cell_status(head),
        version=head.id if head else None, support=head.support if head else 0,
        alternatives=state.alternatives,
        history=[{"version": e.version, "value": e.value, "status": e.status,
                  "valid_from": e.valid_from, "valid_to": e.valid_to, "support": e.support or 0}
                 for e in state.history],
        aliases=aliases, sources=snippets, updated_at=cell.updated_at,
        history_total=state.history_total, history_next=state.history_next,
    )


def versions_with_value(*, namespace: Namespace, key: str, value: str) -> int:
    """How many retained versions of ``key`` hold ``value`` (normalised), whatever status:
    looked up through the value search (:func:`history_page`), never by reading the history."""
    cell = cell_lookup(namespace=namespace, key=key)
    if cell is None or not value.strip():
        return 0
    try:
        entries = history_page(cell, search=value, limit=HISTORY_MAX).entries
    except BadParameter:  # a value without letters or digits: compared the slow way
        return sum(1 for v in Version.objects.filter(cell=cell).values_list("value", flat=True)
                   if same_value(v, value))
    return sum(1 for e in entries if same_value(e.value, value))


@dataclass
class CellAsOf:
    """A cell now or as it was at ``as_of``: head, status, alternatives and a first page of
    history (at most ``limit`` entries, with the total and the cursor of the next page)."""

    cell: Cell
    key: str
    value: str | None
    status: str  # a CellStatus
    version: int | None
    support: int
    alternatives: list[dict[str, Any]] = field(default_factory=list)
    history: list[Entry] = field(default_factory=list)
    history_total: int = 0
    history_next: str | None = None
    as_of: datetime | None = None
    aliases: list[str] = field(default_factory=list)
    # The head's own (None for an empty cell), read with it.
    ordinal: int | None = None
    metadata: Metadata | None = None
    expires_at: datetime | None = None

    @property
    def rendered(self) -> str:
        """The cell as a read's context line shows it (SPEC §7)."""
        return render_cell(CellText(key=self.key, value=self.value, status=self.status,
                                    support=self.support,
                                    alternatives=tuple(a["value"] for a in self.alternatives)))

    @property
    def created_at(self) -> datetime:
        """When the key was first written."""
        return self.cell.created_at

    @property
    def updated_at(self) -> datetime | None:
        """When its current value last changed; None as of a past time (the present's only)."""
        return self.cell.updated_at if self.as_of is None else None

    @property
    def existed(self) -> bool:
        """False when the key had no version yet at ``as_of`` (the empty memory)."""
        return self.history_total > 0


def cell_state(cell: Cell, *, as_of: datetime | None = None,
               history: int = HISTORY_DEFAULT) -> CellAsOf:
    """The cell now (its head row is ``cell.head``) or as of T. Statements now: head (one,
    unless ``cell.head`` is loaded), alternatives (one), the history page (one). As of T: the
    count, the head, its value and support, the alternatives, the page: six. Never more,
    whatever the history's length."""
    own: tuple[Any, ...] = (None, None, None)  # the head's ordinal, metadata and expiry
    if as_of is None:
        head = cell.head
        head_row = (head.id, str(head.status), head.value, head.support) if head else None
        if head is not None:
            own = (head.ordinal, head.metadata, head.expires_at)
    else:
        found = head_as_of(cell, as_of)
        head_row = None
        if found is not None:
            with connection.cursor() as cur:
                cur.execute("SELECT value, ordinal, metadata, expires_at FROM memory_version"
                            " WHERE id = %s", [found[0]])
                value, *rest = cur.fetchone()
            own = (rest[0], stored_json(rest[1]), rest[2])
            head_row = (found[0], found[1], value, support_as_of(found[0], as_of))
    entries: list[Entry] = []
    if history > 0:
        page = history_page(cell, limit=history, as_of=as_of)
        entries, nxt, total = page.entries, page.next, page.total
    else:  # the counts alone: the first page starts at the newest version
        total = count_as_of(cell, as_of)
        nxt = cursor_for(cell, total + 1) if total else None
    contested = head_row is not None and head_row[1] == Status.CONTESTED
    alts = alternatives(cell, as_of) if contested else []
    return CellAsOf(
        cell=cell, key=cell.key, value=head_row[2] if head_row else None,
        status=vocabulary.cell_status(head_row[1] if head_row else None),
        version=head_row[0] if head_row else None, support=head_row[3] if head_row else 0,
        alternatives=alts, history=entries, history_total=total, history_next=nxt, as_of=as_of,
        ordinal=own[0], metadata=own[1], expires_at=own[2])


def cell_as_of(namespace: Namespace, key: str, as_of: datetime | None,
               history: int = HISTORY_DEFAULT) -> CellAsOf | None:
    """The cell a key names (canonical, else an alias) now or as of T, with its aliases; None
    when there is no such key now (an erased key has no past: SPEC §6). :func:`cell_lookup`,
    :func:`cell_state`, then one statement for the aliases."""
    cell = cell_lookup(namespace=namespace, key=key)
    if cell is None:
        return None
    state = cell_state(cell, as_of=as_of, history=history)
    state.aliases = cell_aliases(cell)
    return state


@dataclass(frozen=True)
class CellHead:
    """The cell as the explorer's cell page heads it: no history beyond counts, and the head's
    position in the key's history (``ordinal``)."""

    key: str
    value: str | None
    status: str
    version: int | None
    ordinal: int | None
    support: int
    alternatives: list[dict[str, Any]] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    history_total: int | None = None


def cell_head(cell: Cell, as_of: datetime | None = None) -> CellHead:
    """The head (with its ordinal), its alternatives, the first aliases and the total of
    versions, now or as of ``as_of``: :func:`cell_state` with a page of one, the aliases, and
    the head's ordinal when the newest version is not the head."""
    aliases = cell_aliases(cell, HEAD_ALIASES)
    state = cell_state(cell, as_of=as_of, history=1)
    ordinal = None
    if state.version is not None:
        first = state.history[0] if state.history else None
        ordinal = (first.ordinal if first is not None and first.version == state.version else
                   Version.objects.filter(pk=state.version).values_list("ordinal", flat=True)
                   .first())
    return CellHead(key=cell.key, value=state.value, status=state.status, version=state.version,
                    ordinal=ordinal, support=state.support, alternatives=state.alternatives,
                    aliases=aliases, history_total=state.history_total)


def cells_list(*, namespace: Namespace, status: str | None = None,
               search: str | None = None) -> QuerySet[Cell]:
    """Cells of a namespace with their heads, newest change first; filter by cell status.
    A page of cells shows no vectors: they stay in the database."""
    qs = Cell.objects.filter(namespace=namespace).select_related("head").defer(
        *VECTOR_COLUMNS)
    if status == CellStatus.EMPTY:
        qs = qs.filter(head__isnull=True)
    elif status in (CellStatus.ACTIVE, CellStatus.CONTESTED):
        qs = qs.filter(head__status=status)
    if search:
        qs = qs.filter(Q(key__icontains=search) | Q(head__value__icontains=search))
    return qs.order_by("-updated_at", "-id")


def cell_summary(cell: Cell) -> dict[str, Any]:
    head = cell.head
    return {"key": cell.key, "value": head.value if head else None, "status": cell_status(head),
            "version": head.id if head else None, "ordinal": head.ordinal if head else None,
            "metadata": head.metadata if head else None,
            "expires_at": head.expires_at if head else None,
            "support": head.support if head else 0,
            "created_at": cell.created_at, "updated_at": cell.updated_at}


def cells_full(cells: list[Cell], history: int = HISTORY_DEFAULT) -> list[dict[str, Any]]:
    """The full cell shape (alternatives, the newest ``history`` entries of the history,
    aliases) for a page of cells, in three queries whatever the page size or the histories'
    lengths."""
    ids = [c.pk for c in cells]
    pages = first_pages(cells, history)
    alternatives: dict[int, list[dict[str, Any]]] = {}
    for cell_id, vid, value, support, ordinal, metadata, expires_at in Version.objects.filter(
            cell_id__in=ids, status=Status.ALTERNATIVE).order_by("id").values_list(
            "cell_id", "id", "value", "support", "ordinal", "metadata", "expires_at"):
        alternatives.setdefault(cell_id, []).append(
            {"version": vid, "value": value, "support": support, "ordinal": ordinal,
             "metadata": metadata, "expires_at": expires_at})
    aliases: dict[int, list[str]] = {}
    for cell_id, alias in KeyAlias.objects.filter(cell_id__in=ids).order_by("id").values_list(
            "cell_id", "alias"):
        aliases.setdefault(cell_id, []).append(alias)
    out = []
    for c in cells:
        rows = pages.get(c.pk, [])
        out.append({
            **cell_summary(c),
            "alternatives": alternatives.get(c.pk, []),
            "history": [{"version": e.version, "value": e.value, "status": e.status,
                         "valid_from": e.valid_from, "valid_to": e.valid_to,
                         "ordinal": e.ordinal, "metadata": e.metadata,
                         "expires_at": e.expires_at} for e in rows],
            "history_total": c.version_count,
            "aliases": aliases.get(c.pk, []),
        })
    return out


def _ns_metadata(namespace: Any, metadata: Any) -> Func:
    return Func(namespace, metadata, function="pmem_ns_metadata", output_field=JSONField())


def narrow_cells(qs: QuerySet[Cell], *, namespace: Namespace,
                 metadata: Metadata) -> QuerySet[Cell]:
    """The cells of ``qs`` whose head's metadata holds every entry of ``metadata``, found
    through the index of heads' metadata."""
    return (qs.alias(head_meta=_ns_metadata(F("head__namespace_id"), F("head__metadata")))
            .filter(head_meta__contains=_ns_metadata(Value(namespace.pk),
                                                     Value(metadata, output_field=JSONField())),
                    head__metadata__isnull=False, head__status__in=sorted(HEAD_STATUSES),
                    head__namespace_id=namespace.pk))


def cells_page(*, namespace: Namespace, status: str | None, search: str | None,
               after: str | None, limit: int, history: int = HISTORY_DEFAULT,
               metadata: dict[str, Any] | None = None
               ) -> tuple[list[dict[str, Any]], str | None]:
    """A page of cells by key after ``after`` (the API's keyset), each in the full shape of
    :func:`cells_full`: ``(rows, the key to continue after, or None)``; ``metadata``: only
    the cells whose head's metadata holds each of its entries. Four statements."""
    qs = cells_list(namespace=namespace, status=status, search=search)
    if metadata:
        qs = narrow_cells(qs, namespace=namespace, metadata=metadata)
    if after:
        qs = qs.filter(key__gt=after)
    cells = list(qs.order_by("key")[: limit + 1])
    more = len(cells) > limit
    cells = cells[:limit]
    return cells_full(cells, history), cells[-1].key if more else None
