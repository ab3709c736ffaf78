"""Every read of the provenance graph: cells, history, graph, operation log, vector search."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Prefetch, Q, QuerySet

from memory.domain import HEAD_STATUSES, Status
from memory.domain.render import CellText, ClosedVersion, render_cell
from memory.models import Cell, Evidence, KeyAlias, Namespace, Operation, SupportEdge, Version
from memory.models import Tombstone as TombstoneRow


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
    status: str  # active | contested | empty
    version: int | None
    support: int
    alternatives: list[dict[str, Any]] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)  # newest first
    aliases: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    updated_at: datetime | None = None

    def text(self) -> CellText:
        return CellText(
            key=self.key, value=self.value, status=self.status, support=self.support,
            sources=tuple(self.sources), alternatives=tuple(a["value"] for a in self.alternatives),
            history=tuple(ClosedVersion(h["value"], h["status"]) for h in self.history
                          if h["status"] not in HEAD_STATUSES and h["status"] != Status.ALTERNATIVE),
        )

    def render(self, disclose: Iterable[str] = ()) -> str:
        return render_cell(self.text(), disclose)


def cell_status(head: Version | None) -> str:
    if head is None:
        return "empty"
    return "contested" if head.status == Status.CONTESTED else "active"


def cell_lookup(*, namespace: Namespace, key: str) -> Cell | None:
    """The cell a key names: by canonical key, else by a registered alias."""
    from memory.domain import normalize_key

    norm = normalize_key(key)
    cell = Cell.objects.filter(namespace=namespace, key=norm).select_related("head").first()
    if cell is None:
        alias = KeyAlias.objects.filter(namespace=namespace, alias=norm).select_related(
            "cell__head").first()
        cell = alias.cell if alias is not None else None
    return cell


def cell_detail(*, namespace: Namespace, key: str, sources: int = 3) -> CellDetail | None:
    """The materialized cell (SPEC §7) with its alternatives and full history. Four queries."""
    cell = cell_lookup(namespace=namespace, key=key)
    if cell is None:
        return None
    versions = list(Version.objects.filter(cell=cell).order_by("-id"))
    head = next((v for v in versions if v.status in HEAD_STATUSES), None)
    alternatives = [
        {"version": v.id, "value": v.value, "support": v.support, "valid_from": v.valid_from}
        for v in sorted(versions, key=lambda v: v.id) if v.status == Status.ALTERNATIVE
    ]
    history = [HistoryEntry(v.id, v.value, v.status, v.valid_from, v.valid_to, v.support).as_dict()
               for v in versions]
    aliases = list(KeyAlias.objects.filter(cell=cell).order_by("id").values_list("alias", flat=True))
    snippets: list[str] = []
    if head is not None:
        snippets = [t for t in SupportEdge.objects.filter(version=head, evidence__isnull=False)
                    .order_by("-id").values_list("evidence__text", flat=True)[:sources] if t]
    return CellDetail(
        key=cell.key, value=head.value if head else None, status=cell_status(head),
        version=head.id if head else None, support=head.support if head else 0,
        alternatives=alternatives, history=history, aliases=aliases, sources=snippets,
        updated_at=cell.updated_at,
    )


def versions_with_value(*, namespace: Namespace, key: str, value: str) -> int:
    """How many retained versions of ``key`` hold ``value`` (normalised), whatever status."""
    from memory.domain import same_value

    cell = cell_lookup(namespace=namespace, key=key)
    if cell is None:
        return 0
    return sum(1 for v in Version.objects.filter(cell=cell).values_list("value", flat=True)
               if same_value(v, value))


def cells_list(*, namespace: Namespace, status: str | None = None,
               search: str | None = None) -> QuerySet[Cell]:
    """Cells of a namespace with their heads, newest change first; filter by cell status."""
    qs = Cell.objects.filter(namespace=namespace).select_related("head")
    if status == "empty":
        qs = qs.filter(head__isnull=True)
    elif status in ("active", "contested"):
        qs = qs.filter(head__status=status)
    if search:
        qs = qs.filter(Q(key__icontains=search) | Q(head__value__icontains=search))
    return qs.order_by("-updated_at", "-id")


def cell_summary(cell: Cell) -> dict[str, Any]:
    head = cell.head
    return {"key": cell.key, "value": head.value if head else None, "status": cell_status(head),
            "version": head.id if head else None, "support": head.support if head else 0,
            "updated_at": cell.updated_at}


def operations_list(*, namespace: Namespace, key: str | None = None,
                    actor: str | None = None) -> QuerySet[Operation]:
    qs = Operation.objects.filter(namespace=namespace)
    if key:
        from memory.domain import normalize_key

        qs = qs.filter(key=normalize_key(key))
    if actor:
        qs = qs.filter(actor=actor)
    return qs.order_by("-id")


def cell_graph(*, namespace: Namespace, key: str) -> dict[str, list[dict[str, Any]]] | None:
    """The cell's provenance subgraph: versions, evidence, operations, tombstones, typed edges."""
    cell = cell_lookup(namespace=namespace, key=key)
    if cell is None:
        return None
    versions = list(Version.objects.filter(cell=cell).order_by("id"))
    ops = list(Operation.objects.filter(cell=cell).order_by("id"))
    supports = list(SupportEdge.objects.filter(version__cell=cell).select_related("evidence")
                    .order_by("id"))
    tombs = list(TombstoneRow.objects.filter(version__cell=cell).order_by("id"))
    nodes: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []
    for v in versions:
        nodes.append({"id": f"v{v.id}", "kind": "version", "label": v.value, "status": v.status,
                      "version": v.id, "support": v.support, "valid_from": v.valid_from,
                      "valid_to": v.valid_to})
        if v.supersedes_id:
            edges.append({"source": f"v{v.id}", "target": f"v{v.supersedes_id}", "type": "supersedes"})
        if v.alternative_of_id:
            edges.append({"source": f"v{v.id}", "target": f"v{v.alternative_of_id}",
                          "type": "alternative_of"})
    evidence_seen: dict[int, Evidence] = {}
    for s in supports:
        if s.evidence_id is not None:
            evidence_seen.setdefault(s.evidence_id, s.evidence)
            edges.append({"source": f"v{s.version_id}", "target": f"e{s.evidence_id}",
                          "type": "supported_by"})
    for e in sorted(evidence_seen.values(), key=lambda e: e.seq):
        nodes.append({"id": f"e{e.id}", "kind": "evidence", "label": f"#{e.seq}", "seq": e.seq,
                      "text": e.text, "source": e.source, "received_at": e.received_at})
    for o in ops:
        nodes.append({"id": f"o{o.id}", "kind": "operation", "label": o.type, "op": o.type,
                      "requested": o.requested, "actor": o.actor, "reason": o.reason,
                      "seq": o.seq, "version": o.version_id, "created_at": o.created_at,
                      "raw_output": o.raw_output})
    for t in tombs:
        nodes.append({"id": f"t{t.id}", "kind": "tombstone", "label": "revoked",
                      "operation": t.operation_id, "created_at": t.created_at})
        edges.append({"source": f"t{t.id}", "target": f"v{t.version_id}", "type": "revokes"})
    return {"key": cell.key, "nodes": nodes, "edges": edges}


__all__ = [
    "CellDetail", "HistoryEntry", "Prefetch", "cell_detail", "cell_graph", "cell_lookup",
    "cell_status", "cell_summary", "cells_list", "operations_list", "versions_with_value",
]
