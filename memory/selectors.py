"""Every read of the provenance graph: cells, history, graph, operation log, vector search."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg
from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import F, Q, QuerySet, Window
from django.db.models.functions import Left, Length, RowNumber
from django.utils import timezone
from pgvector.django import CosineDistance

from memory.domain import (
    DISCLOSURES,
    HEAD_STATUSES,
    CellStatus,
    EvidenceState,
    Status,
    normalize_key,
    same_value,
    vocabulary,
)
from memory.domain.render import (
    CellText,
    ClosedVersion,
    evidence_text,
    render_cell,
    render_context,
)
from memory.domain.scopes import token_refusal
from memory.history import (
    HISTORY_DEFAULT,
    HISTORY_MAX,
    HistoryError,
    cell_state,
    first_pages,
    history_page,
)
from memory.history import alternatives as history_alternatives
from memory.llm.embedding import embed_texts
from memory.models import (
    ApiToken,
    AuditEntry,
    Cell,
    Evidence,
    KeyAlias,
    Membership,
    Namespace,
    Operation,
    SourceTrust,
    SupportEdge,
    Version,
)
from memory.models import Tombstone as TombstoneRow
from memory.services.binding import vector_literal


@dataclass(frozen=True)
class HistoryEntry:
    version: int
    value: str
    status: str
    valid_from: datetime
    valid_to: datetime | None
    support: int

    def as_dict(self) -> dict[str, Any]:
        return {"version": self.version, "value": self.value, "status": self.status,
                "valid_from": self.valid_from, "valid_to": self.valid_to, "support": self.support}


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
    history_next: str | None = None  # the cursor of the next page (memory.history)

    def text(self) -> CellText:
        return CellText(
            key=self.key, value=self.value, status=self.status, support=self.support,
            sources=tuple(self.sources), alternatives=tuple(a["value"] for a in self.alternatives),
            history=tuple(ClosedVersion(h["value"], h["status"]) for h in self.history
                          if h["status"] not in HEAD_STATUSES and h["status"] != Status.ALTERNATIVE),
        )

    def render(self, disclose: Iterable[str] = ()) -> str:
        return render_cell(self.text(), disclose)


def cell_status(head: Version | None) -> CellStatus:
    """The status a head gives its cell (:func:`memory.domain.vocabulary.cell_status`)."""
    return vocabulary.cell_status(head.status if head is not None else None)


def cell_lookup(*, namespace: Namespace, key: str) -> Cell | None:
    """The cell a key names: by canonical key, else by a registered alias."""
    norm = normalize_key(key)
    cell = Cell.objects.filter(namespace=namespace, key=norm).select_related("head").first()
    if cell is None:
        alias = KeyAlias.objects.filter(namespace=namespace, alias=norm).select_related(
            "cell__head").first()
        cell = alias.cell if alias is not None else None
    return cell


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
    aliases = list(KeyAlias.objects.filter(cell=cell).order_by("id").values_list("alias", flat=True))
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
        history=[HistoryEntry(e.version, e.value, e.status, e.valid_from, e.valid_to,
                              e.support or 0).as_dict() for e in state.history],
        aliases=aliases, sources=snippets, updated_at=cell.updated_at,
        history_total=state.history_total, history_next=state.history_next,
    )


def versions_with_value(*, namespace: Namespace, key: str, value: str) -> int:
    """How many retained versions of ``key`` hold ``value`` (normalised), whatever status:
    looked up through the value search (memory.history), never by reading the history."""
    cell = cell_lookup(namespace=namespace, key=key)
    if cell is None or not value.strip():
        return 0
    try:
        entries, _, _ = history_page(cell, search=value, limit=HISTORY_MAX)
    except HistoryError:  # a value without letters or digits: compared the slow way
        return sum(1 for v in Version.objects.filter(cell=cell).values_list("value", flat=True)
                   if same_value(v, value))
    return sum(1 for e in entries if same_value(e.value, value))


def cells_list(*, namespace: Namespace, status: str | None = None,
               search: str | None = None) -> QuerySet[Cell]:
    """Cells of a namespace with their heads, newest change first; filter by cell status.
    A page of cells shows no vectors: they stay in the database (decision 21)."""
    qs = Cell.objects.filter(namespace=namespace).select_related("head").defer(
        "embedding", "key_embedding", "embedded_text")
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
            "version": head.id if head else None, "support": head.support if head else 0,
            "created_at": cell.created_at, "updated_at": cell.updated_at}


def cells_full(cells: list[Cell], history: int = HISTORY_DEFAULT) -> list[dict[str, Any]]:
    """The full cell shape (alternatives, the newest ``history`` entries of the history,
    aliases) for a page of cells, in three queries whatever the page size or the histories'
    lengths."""
    ids = [c.pk for c in cells]
    pages = first_pages(cells, history)
    alternatives: dict[int, list[dict[str, Any]]] = {}
    for cell_id, vid, value, support in Version.objects.filter(
            cell_id__in=ids, status=Status.ALTERNATIVE).order_by("id").values_list(
            "cell_id", "id", "value", "support"):
        alternatives.setdefault(cell_id, []).append(
            {"version": vid, "value": value, "support": support})
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
                         "valid_from": e.valid_from, "valid_to": e.valid_to} for e in rows],
            "history_total": c.version_count,
            "aliases": aliases.get(c.pk, []),
        })
    return out


def operations_list(*, namespace: Namespace, key: str | None = None,
                    actor: str | None = None, key_contains: str | None = None,
                    op: str | None = None, source: str | None = None) -> QuerySet[Operation]:
    """The operation log, newest first, filtered (CONTRACT): ``key`` exactly (normalised, as
    stored), ``key_contains`` a part of a key (normalised the same way, so ``alice home``
    finds ``alice_home_city``), ``op`` a log type, ``actor`` and ``source`` exactly."""
    qs = Operation.objects.filter(namespace=namespace)
    if key:
        qs = qs.filter(key=normalize_key(key))
    if key_contains and normalize_key(key_contains):
        qs = qs.filter(key__contains=normalize_key(key_contains))
    if op:
        qs = qs.filter(type=op)
    if actor:
        qs = qs.filter(actor=actor)
    if source is not None and source != "":
        qs = qs.filter(source=source)
    return qs.order_by("-id")


def observation_note(*, state: str, facts_found: int | None, operations: int,
                     extractor: str | None) -> str:
    """Said in words when a committed observation yielded no fact (issue 17: it was dropped
    silently): which extractor read it and what to do instead. Empty otherwise."""
    if state != EvidenceState.COMMITTED or facts_found is None or facts_found > 0 or operations:
        return ""
    by = {"rules": "the rule extractor", "model": "the model"}.get(
        (extractor or "").split("+")[-1], "extraction")
    hint = ("write it as `key = value` lines or send structured facts, or configure a model"
            if by == "the rule extractor" else "send it as structured facts")
    return f"No fact found: {by} read nothing it could store in this text; {hint}."


#: Characters of an observation's text that a graph node or a list row carries: the whole
#: text is one link away (decision 21). A graph that copied whole rows into every node took
#: 3.4 GB for one observation of 500 facts on one key.
GRAPH_TEXT_CHARS = 500
LIST_TEXT_CHARS = 200
#: Characters of an operation's raw model output a graph node carries: one annotation call's
#: output is stored on every operation it produced.
GRAPH_RAW_OUTPUT_CHARS = 2000
#: Characters of a supporting text a cell's support disclosure reads: it renders 60 of them
#: with whitespace collapsed, so only a text opening with hundreds of blanks could differ.
SNIPPET_SOURCE_CHARS = 400


def evidence_heads(ids: Iterable[int], chars: int = GRAPH_TEXT_CHARS) -> dict[int, dict[str, Any]]:
    """Observations as graphs and lists show them, in one statement by seq: ``id, seq, source,
    received_at``, the text cut to ``chars`` in SQL (``text``) and its whole length
    (``text_chars``). Never the facts, the extraction or the embedding (decision 21)."""
    rows = Evidence.objects.filter(pk__in=list(ids)).order_by("seq").values(
        "id", "seq", "source", "received_at", head=Left("text", chars), text_chars=Length("text"))
    return {r["id"]: {"id": r["id"], "seq": r["seq"], "source": r["source"],
                      "received_at": r["received_at"], "text": r["head"],
                      "text_chars": r["text_chars"], "text_truncated": r["text_chars"] > chars}
            for r in rows}


def cell_graph(*, namespace: Namespace, key: str) -> dict[str, Any] | None:
    """The cell's provenance subgraph: versions, evidence, operations, tombstones, typed edges.

    Every observation an operation or a support edge names is one evidence node, read once
    with its text truncated (:func:`evidence_heads`); operations carry its id, not its text."""
    cell = cell_lookup(namespace=namespace, key=key)
    if cell is None:
        return None
    nodes, edges = _version_nodes(cell)
    supports = list(SupportEdge.objects.filter(version__cell=cell, evidence__isnull=False)
                    .order_by("id").values_list("version_id", "evidence_id"))
    edges += [{"source": f"v{v}", "target": f"e{e}", "type": "supported_by"} for v, e in supports]
    ops = _operation_nodes(cell)
    # Evidence a retraction's operation names supports no version, yet is why it happened.
    evidence = evidence_heads({e for _, e in supports} | {o["evidence"] for o in ops
                                                          if o["evidence"] is not None})
    nodes += [{"id": f"e{e['id']}", "kind": "evidence", "label": f"#{e['seq']}",
               "observation": e["id"], **{k: v for k, v in e.items() if k != "id"}}
              for e in evidence.values()]
    nodes += ops
    for tid, version_id, operation_id, created_at in TombstoneRow.objects.filter(
            version__cell=cell).order_by("id").values_list(
            "id", "version_id", "operation_id", "created_at"):
        nodes.append({"id": f"t{tid}", "kind": "tombstone", "label": "revoked",
                      "operation": operation_id, "created_at": created_at})
        edges.append({"source": f"t{tid}", "target": f"v{version_id}", "type": "revokes"})
    return {"key": cell.key, "nodes": nodes, "edges": edges}


def _version_nodes(cell: Cell) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The cell's versions, oldest first, with their supersedes / alternative_of edges."""
    nodes: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []
    for vid, value, status, support, valid_from, valid_to, supersedes, alternative_of, restores in (
            Version.objects.filter(cell=cell).order_by("id").values_list(
                "id", "value", "status", "support", "valid_from", "valid_to", "supersedes_id",
                "alternative_of_id", "restores_id")):
        nodes.append({"id": f"v{vid}", "kind": "version", "label": value, "status": status,
                      "version": vid, "support": support, "valid_from": valid_from,
                      "valid_to": valid_to})
        if supersedes:
            edges.append({"source": f"v{vid}", "target": f"v{supersedes}", "type": "supersedes"})
        if alternative_of:
            edges.append({"source": f"v{vid}", "target": f"v{alternative_of}",
                          "type": "alternative_of"})
        if restores:  # SPEC §3 restore: the undo points at the mistake it undid
            edges.append({"source": f"v{vid}", "target": f"v{restores}", "type": "restores"})
    return nodes, edges


def _operation_nodes(cell: Cell) -> list[dict[str, Any]]:
    """The cell's operations in the order applied: the observation each came from by id
    (its node holds the text), and the head of the raw model output."""
    return [{"id": f"o{o['id']}", "kind": "operation", "label": o["type"], "op": o["type"],
             "requested": o["requested"], "actor": o["actor"], "reason": o["reason"],
             "seq": o["seq"], "version": o["version_id"], "created_at": o["created_at"],
             "evidence": o["evidence_id"], "raw_output": o["raw"],
             "raw_output_chars": o["raw_chars"],
             "raw_output_truncated": o["raw_chars"] > GRAPH_RAW_OUTPUT_CHARS}
            for o in Operation.objects.filter(cell=cell).order_by("id").values(
                "id", "type", "requested", "actor", "reason", "seq", "version_id", "created_at",
                "evidence_id", raw=Left("raw_output", GRAPH_RAW_OUTPUT_CHARS),
                raw_chars=Length("raw_output"))]


# --- reads for agents (SPEC §7) ---------------------------------------------------------------


@dataclass(frozen=True)
class ReadResult:
    mode: str
    context: str
    items: list[dict[str, Any]]
    context_chars: int
    note: str = ""
    available: bool = True

    def as_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"mode": self.mode, "context": self.context, "items": self.items,
                                "context_chars": self.context_chars}
        if self.note:
            body["note"] = self.note
        if not self.available:
            body["available"] = False
        return body


FRONTIER_HEADER = "Current memory (one line per key; each value shown holds now):"
RAW_HEADER = "Retrieved observations (most similar first):"
ORDERED_HEADER = "Retrieved observations in arrival order ([t=N]: larger N is newer):"


def _query_vector(query: str) -> list[float]:
    return embed_texts([query])[0]


#: HNSW candidate list of the vector reads. Measured by ``pmem_bench perf`` (tie-aware
#: recall@12 against an exact scan, m=16, ef_construction=64): at 100k cells 100 gives 0.973
#: (p95 5.7 ms), 200 gives 0.981 (p95 8.6 ms); the exact scan takes 47 ms.
FRONTIER_EF_SEARCH = 200


def _vector_search_settings() -> None:
    """Inside the read's transaction: a wider HNSW candidate list, and (pgvector ≥ 0.8)
    iterative scans so filtering by namespace cannot starve the top-k."""
    with connection.cursor() as cur:
        cur.execute(f"SET LOCAL hnsw.ef_search = {FRONTIER_EF_SEARCH}")
        try:
            with transaction.atomic():
                cur.execute("SET LOCAL hnsw.iterative_scan = 'relaxed_order'")
        except DatabaseError:
            pass  # older pgvector: plain post-filtered scan


# Top-k over the frontier index (HNSW, filtered by namespace with iterative scans) merged with
# an exact scan of the cells whose head moved since the index last held them (vector_stale,
# at most PMEM_FRONTIER_FLUSH_AT of them between flushes; see memory.services.frontier).
_FRONTIER_SQL = """
SELECT id, d FROM (
    (SELECT f.cell_id AS id, f.embedding <=> %(q)s::vector AS d
       FROM memory_frontiervector f
      WHERE f.namespace_id = %(ns)s
      ORDER BY f.embedding <=> %(q)s::vector LIMIT %(k)s)
    UNION ALL
    (SELECT c.id, c.embedding <=> %(q)s::vector
       FROM memory_cell c
      WHERE c.namespace_id = %(ns)s AND c.vector_stale
        AND c.head_id IS NOT NULL AND c.embedding IS NOT NULL
      ORDER BY 2 LIMIT %(k)s)
) AS merged ORDER BY d, id LIMIT %(k)s
"""


def frontier_read(*, namespace: Namespace, query: str, k: int = 12,
                  disclose: Iterable[str] = ()) -> ReadResult:
    """Top-k cells by cosine over their ``key: value`` embeddings, one line each (SPEC §7)."""
    wanted = [d for d in DISCLOSURES if d in set(disclose)]
    vector = _query_vector(query)
    with transaction.atomic():
        _vector_search_settings()
        with connection.cursor() as cur:
            literal = vector_literal(vector)
            cur.execute(_FRONTIER_SQL, {"q": literal, "ns": namespace.pk, "k": k})
            ranked = cur.fetchall()
        by_id = Cell.objects.select_related("head").defer(
            "embedding", "key_embedding", "embedded_text").in_bulk([r[0] for r in ranked])
    found = [(by_id[cell_id], distance) for cell_id, distance in ranked if cell_id in by_id]
    cells = [cell for cell, _ in found]
    texts = _cell_texts(cells, wanted)
    context = render_context(texts, wanted, header=FRONTIER_HEADER)
    items = [{**cell_summary(c), "score": round(1 - float(distance), 4),
              "line": render_cell(t, wanted)} for (c, distance), t in zip(found, texts, strict=True)]
    return ReadResult("frontier", context, items, len(context))


#: Versions of each key the ``history`` disclosure looks at (the newest).
DISCLOSED_HISTORY = 50


# As of T, cells are ranked by their key's embedding (a key's name does not change over time;
# the ``key: value`` embeddings are of the present values) among the cells that had a head at T.
_FRONTIER_AS_OF_SQL = f"""
SELECT c.id, c.key, h.version_id, h.status, v.value, d.d FROM (
    SELECT c.id, c.key_embedding <=> %(q)s::vector AS d FROM memory_cell c
     WHERE c.namespace_id = %(ns)s AND c.key_embedding IS NOT NULL) AS d
  JOIN memory_cell c ON c.id = d.id
 CROSS JOIN LATERAL (
     SELECT s.version_id, s.status, s.until FROM memory_versionspan s
      WHERE s.cell_id = c.id AND s.status IN ({", ".join(f"'{s}'" for s in sorted(HEAD_STATUSES))})
        AND s.since <= %(t)s ORDER BY s.since DESC, s.id DESC LIMIT 1) AS h
  JOIN memory_version v ON v.id = h.version_id
 WHERE h.until IS NULL OR h.until > %(t)s
 ORDER BY d.d, c.id LIMIT %(k)s
"""


def frontier_read_as_of(*, namespace: Namespace, query: str, as_of: datetime, k: int = 12,
                        disclose: Iterable[str] = ()) -> ReadResult:
    """The frontier read as memory was at ``as_of`` (SPEC §9): the top-k cells that had a head
    at T, by cosine over their keys' embeddings, each with the value and status it had then;
    ``alternatives`` disclosed as of T (``support`` and ``history`` disclose the present only,
    so they are left out and the answer says so)."""
    wanted = [d for d in DISCLOSURES if d in set(disclose)]
    literal = vector_literal(_query_vector(query))
    with connection.cursor() as cur:
        cur.execute(_FRONTIER_AS_OF_SQL, {"q": literal, "ns": namespace.pk, "t": as_of,
                                          "k": k})
        rows = cur.fetchall()
    texts, items = [], []
    for cell_id, key, version, status, value, distance in rows:
        alts: tuple[str, ...] = ()
        if "alternatives" in wanted and status == Status.CONTESTED:
            cell = Cell(pk=cell_id, namespace=namespace, key=key)
            alts = tuple(a["value"] for a in history_alternatives(cell, as_of))
        text = CellText(key=key, value=value, status=vocabulary.cell_status(status),
                        support=0, alternatives=alts)
        texts.append(text)
        items.append({"key": key, "value": value, "status": text.status, "version": version,
                      "score": round(1 - float(distance), 4),
                      "line": render_cell(text, ["alternatives"] if alts else [])})
    shown = [d for d in wanted if d == "alternatives"]
    context = render_context(texts, shown, header=FRONTIER_HEADER)
    note = (f"as of {as_of.isoformat()}" + (
        "; support and history are disclosed for the present only, left out"
        if set(wanted) - {"alternatives"} else ""))
    return ReadResult("frontier", context, items, len(context), note=note)


def _cell_texts(cells: list[Cell], disclose: list[str]) -> list[CellText]:
    """Materialized cells with the disclosures asked for, in two queries at most."""
    alternatives: dict[int, list[str]] = {}
    history: dict[int, list[ClosedVersion]] = {}
    sources: dict[int, list[str]] = {}
    ids = [c.pk for c in cells]
    if ids and "alternatives" in disclose:
        for cell_id, value in Version.objects.filter(
                cell_id__in=ids, status=Status.ALTERNATIVE).order_by("id").values_list(
                "cell_id", "value"):
            alternatives.setdefault(cell_id, []).append(value)
    if ids and "history" in disclose:
        # The closed versions among each key's newest DISCLOSED_HISTORY (SPEC §10: a read
        # does not grow with the length of a key's history).
        for cell_id, entries in first_pages(cells, DISCLOSED_HISTORY).items():
            history[cell_id] = [ClosedVersion(e.value, e.status) for e in entries
                                if e.status not in HEAD_STATUSES
                                and e.status != Status.ALTERNATIVE]
    if ids and "support" in disclose:
        # The newest three non-empty texts per head, cut in SQL: a head with thousands of
        # support edges costs three short strings, not every supporting text (decision 21).
        heads = {c.head_id: c.pk for c in cells}
        newest = (SupportEdge.objects.filter(version_id__in=list(heads), evidence__isnull=False)
                  .exclude(evidence__text="")
                  .annotate(rank=Window(RowNumber(), partition_by=[F("version_id")],
                                        order_by=F("id").desc()))
                  .filter(rank__lte=3).order_by("version_id", "-id"))
        for version_id, text in newest.values_list(
                "version_id", Left("evidence__text", SNIPPET_SOURCE_CHARS)):
            sources.setdefault(heads[version_id], []).append(text)
    return [
        CellText(key=c.key, value=c.head.value if c.head else None, status=cell_status(c.head),
                 support=c.head.support if c.head else 0, sources=tuple(sources.get(c.pk, ())),
                 alternatives=tuple(alternatives.get(c.pk, ())),
                 history=tuple(history.get(c.pk, ())))
        for c in cells
    ]


def evidence_line(e: Evidence) -> str:
    """An observation on one line, as the raw reads show it. The facts are read only when there
    is no text (a deferred column is loaded on access: decision 21)."""
    facts = None if e.text.strip() else e.facts
    return " ".join(evidence_text(e.text, facts).split())


def _load_facts_of_textless(rows: Sequence[Evidence]) -> None:
    """A raw line is the text, else the facts (``evidence_text``): load the facts of the rows
    without text, and only theirs (decision 21)."""
    textless = [e for e in rows if not e.text.strip()]
    if textless:
        facts = dict(Evidence.objects.filter(pk__in=[e.pk for e in textless])
                     .values_list("id", "facts"))
        for e in textless:
            e.facts = facts.get(e.pk)


def raw_read(*, namespace: Namespace, query: str, k: int = 10, ordered: bool = False,
             as_of: datetime | None = None) -> ReadResult:
    """Top-k evidence by cosine (the retrieval baseline); ``ordered`` tags each line with its
    arrival index ``[t=seq]`` and sorts by it. As of T: the observations committed by T."""
    vector = _query_vector(query)
    with transaction.atomic():
        _vector_search_settings()
        found = Evidence.objects.filter(namespace=namespace, embedding__isnull=False)
        if as_of is not None:
            found = found.filter(committed_at__lte=as_of)
        rows = list(found
                    .only("id", "seq", "text", "source", "observed_at", "received_at")
                    .annotate(distance=CosineDistance("embedding", vector))
                    .order_by("distance")[:k])
    _load_facts_of_textless(rows)
    if ordered:
        rows.sort(key=lambda e: e.seq)
        lines = [f"[t={e.seq}] {evidence_line(e)}" for e in rows]
        header, mode = ORDERED_HEADER, "raw_ordered"
    else:
        lines = [evidence_line(e) for e in rows]
        header, mode = RAW_HEADER, "raw"
    context = "\n".join([header, *lines])
    items = [{"id": e.id, "seq": e.seq, "text": line, "score": round(1 - float(e.distance), 4),
              "source": e.source, "observed_at": e.observed_at, "received_at": e.received_at}
             for e, line in zip(rows, lines, strict=True)]
    return ReadResult(mode, context, items, len(context))


def evidence_for_pruning(ids: list[int]) -> dict[int, Evidence]:
    """The observations a raw read returned, with their embeddings and dates (the pruned
    read compares them pairwise); the facts only of those without text (decision 21)."""
    rows = Evidence.objects.defer("extracted", "facts").in_bulk(ids)
    _load_facts_of_textless(list(rows.values()))
    return rows


# --- access: tokens, members, the audit log ---------------------------------------------------


def tokens_list(*, namespace: Namespace) -> QuerySet[ApiToken]:
    """The namespace's tokens, newest first (never a secret: the database has none)."""
    return (ApiToken.objects.filter(namespace=namespace).select_related("created_by")
            .order_by("-id"))


def token_row(token: ApiToken) -> dict[str, Any]:
    """One token as ``pmem_token list`` prints it and the explorer shows it."""
    refusal = token_refusal(revoked_at=token.revoked_at, expires_at=token.expires_at,
                            now=timezone.now())
    return {"id": token.pk, "namespace": token.namespace.name if token.namespace else None,
            **({"namespace_prefix": token.namespace_prefix} if token.namespace_prefix else {}),
            "prefix": token.prefix,
            "name": token.name, "client": token.client, "scope": token.scope,
            "created_by": token.created_by.get_username() if token.created_by else None,
            "created_at": token.created_at, "expires_at": token.expires_at,
            "last_used_at": token.last_used_at, "revoked_at": token.revoked_at,
            "sources": list(token.sources),
            "state": (refusal or "token active").removeprefix("token ")}


def token_rows(*, namespace: Namespace) -> list[dict[str, Any]]:
    return [token_row(t) for t in tokens_list(namespace=namespace).select_related("namespace")]


def application_token_rows(*, namespace_prefix: str) -> list[dict[str, Any]]:
    """The application tokens of exactly this prefix, newest first (no secret)."""
    return [token_row(t) for t in ApiToken.objects.filter(namespace_prefix=namespace_prefix)
            .select_related("created_by").order_by("-id")]


def source_trust_list(*, namespace: Namespace) -> list[tuple[str, int]]:
    """The namespace's sources with a trust level, most trusted first (SPEC §8)."""
    return list(SourceTrust.objects.filter(namespace=namespace).order_by("-level", "source")
                .values_list("source", "level"))


def members_list(*, namespace: Namespace) -> QuerySet[Membership]:
    return (Membership.objects.filter(namespace=namespace).select_related("user")
            .order_by("user__username"))


def audit_list(*, namespace: Namespace, limit: int = 100) -> list[AuditEntry]:
    """The access audit log of a namespace, newest first."""
    return list(AuditEntry.objects.filter(namespace=namespace).order_by("-id")[:limit])
