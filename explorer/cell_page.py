"""What the cell page shows, built from bounded reads (SPEC §10) at the present or as of a
past moment (SPEC §9): the head, one page of history, a graph window, the timeline.

The reads themselves are ``memory.history``'s (history pages, graph windows, the status
timeline, the cell as of T); this module shapes them for the templates and the scripts:
per-key ordinals, links into the past for each operation, the pager's URLs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse

from explorer import history_shim as mh
from explorer.access import Access
from explorer.cell_reads import (
    CHOICES,
    TICK,
    BadParameter,
    Steps,
    as_of_param,
    in_flight,
    op_steps,
    restorable_versions,
    version_choices,
)
from explorer.selectors import live_fingerprint
from explorer.workbench_selectors import last_operation_id
from memory.domain import Status
from memory.models import Cell, KeyAlias, Namespace
from memory.selectors import cell_lookup

#: The graph's first window (CONTRACT: default 40, at most 500 versions).
GRAPH_LIMIT = 40
GRAPH_LIMIT_MAX = 500
HISTORY_PAGE = 50
TIMELINE_BUCKETS = 60


@dataclass(frozen=True)
class CellHead:
    """The cell as the page's head shows it: no history beyond counts."""

    key: str
    value: str | None
    status: str
    version: int | None
    ordinal: int | None
    support: int
    alternatives: list[dict[str, Any]] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    history_total: int | None = None


def load_cell(namespace: Namespace, key: str) -> Cell | None:
    """The cell a key names (canonical or alias), with its head; one or two index probes."""
    return cell_lookup(namespace=namespace, key=key)


def cell_head(cell: Cell, as_of: datetime | None = None) -> CellHead:
    """The head, its alternatives and the total of versions, now or as of ``as_of``."""
    aliases = list(KeyAlias.objects.filter(cell=cell).order_by("id")
                   .values_list("alias", flat=True)[:20])
    at = mh.cell_state(cell, as_of=as_of)
    return CellHead(key=cell.key, value=at.value, status=at.status, version=at.version,
                    ordinal=at.ordinal, support=at.support, alternatives=at.alternatives,
                    aliases=aliases, history_total=at.total)


def status_at(version_id: int, as_of: datetime) -> str | None:
    return mh.version_status_at(version_id, as_of)


# --- history ----------------------------------------------------------------------------------


def _when(moment: datetime | None) -> tuple[str, str]:
    """(ISO, display) of a time, UTC: formatted here once rather than by template filters
    (fifty rows of them were most of the page's rendering time)."""
    if moment is None:
        return "", ""
    utc = moment.astimezone(UTC)
    return utc.isoformat(), utc.strftime("%Y-%m-%d %H:%M:%S")


def _row(entry: dict[str, Any]) -> dict[str, Any]:
    """A history entry as the table renders it: numbers and times already text."""
    vf_iso, vf_text = _when(entry["valid_from"])
    vt_iso, vt_text = _when(entry["valid_to"])
    return {**entry, "id": str(entry["version"]), "name": f"v{entry['ordinal']}",
            "support_text": "" if entry["support"] is None else str(entry["support"]),
            "vf_iso": vf_iso, "vf_text": vf_text, "vt_iso": vt_iso, "vt_text": vt_text}


def history_section(cell: Cell, *, ns: str, as_of: datetime | None = None,
                    before: str | None = None, search: str = "",
                    limit: int = HISTORY_PAGE) -> dict[str, Any]:
    """One page of history with its position and the pager's links (page and fragment)."""
    search = search.strip()[:200]
    page = mh.history_page(cell, before=before, limit=limit, as_of=as_of, search=search or None)
    entries = [_row(e) for e in page.entries]
    base = {k: v for k, v in (("as_of", as_of_param(as_of) if as_of else ""), ("q", search)) if v}
    page_url = reverse("explorer:cell", args=[ns, cell.key])
    frag_url = reverse("explorer:cell_history", args=[ns, cell.key])

    def urls(name: str, extra: dict[str, str] | None) -> dict[str, str]:
        if extra is None:
            return {}
        query = urlencode({**base, **extra})
        return {f"{name}_url": f"{page_url}?{query}" if query else page_url,
                f"{name}_url_fragment": f"{frag_url}?{query}" if query else frag_url}

    first = entries[0]["ordinal"] if entries else None
    last = entries[-1]["ordinal"] if entries else None
    if not entries:
        position = "No versions." if not search else ""
    elif search:
        position = (f"{page.total:,} version{'s' if page.total != 1 else ''} whose value "
                    f"matches “{search}”" + ("" if page.total <= len(entries) else
                                            f"; showing {len(entries)} from v{first}"))
    else:
        position = (f"Versions v{first}–v{last} of {page.total:,}" if first != last
                    else f"Version v{first} of {page.total:,}")
    # Newer: the page before this one (a cursor the read gives), else the first page.
    newer = {"before": page.newer} if page.newer else ({} if before else None)
    return {
        "entries": entries, "total": page.total, "q": search, "position": position,
        "self_url": f"{frag_url}?{urlencode({**base, **({'before': before} if before else {})})}",
        **urls("older", {"before": page.next} if page.next else None),
        **urls("newer", newer),
        **urls("newest", {} if before and page.newer else None),
    }


def retract_choices(cell: Cell, search: str) -> tuple[list[dict[str, Any]], bool]:
    """The retract form's choices: the newest versions, the one named, or those whose value
    matches ``search`` (the history's indexed value search), never a revoked one."""
    named = version_choices(cell=cell, search=search)
    if named is not None:
        return named
    try:
        page = mh.history_page(cell, before=None, limit=2 * CHOICES, as_of=None, search=search)
    except BadParameter:
        return [], False
    rows = [e for e in page.entries if e["status"] != Status.REVOKED]
    return rows[:CHOICES], page.total > CHOICES


# --- the page ---------------------------------------------------------------------------------


def _steps(steps: Steps, ns: str, key: str) -> dict[str, str]:
    page = reverse("explorer:cell", args=[ns, key])

    def at(moment: datetime | None) -> str:
        return f"{page}?{urlencode({'as_of': as_of_param(moment)})}" if moment else ""

    return {"back": at(steps.back), "back_label": steps.back_label,
            "forward": at(steps.forward), "forward_label": steps.forward_label}


def cell_context(access: Access, cell: Cell, *, as_of: datetime | None = None,
                 before: str | None = None, search: str = "", **extra: Any) -> dict[str, Any]:
    """Everything cell.html and its partials read. While ``as_of`` is set: no actions."""
    ns = access.namespace.name
    head = cell_head(cell, as_of)
    page = reverse("explorer:cell", args=[ns, cell.key])
    context: dict[str, Any] = {
        "ns": access.namespace, "role": access.role, "can_act": access.can_act and not as_of,
        "can_manage": access.can_manage, "section": "frontier",
        "fingerprint": live_fingerprint(access.namespace),
        "cell": head, "as_of": as_of, "as_of_param": as_of_param(as_of) if as_of else "",
        "as_of_local": as_of.strftime("%Y-%m-%dT%H:%M:%S") if as_of else "",
        "as_of_action": page, "present_url": page, "as_of_subject": f"{cell.key}",
        "steps": _steps(op_steps(cell=cell, as_of=as_of), ns, cell.key),
        "graph_limit": GRAPH_LIMIT,
        "history": history_section(cell, ns=ns, as_of=as_of, before=before, search=search),
        "in_flight": [] if as_of else in_flight(namespace=access.namespace),
        "op_form": extra.pop("op_form", None), "obs_form": extra.pop("obs_form", None),
        **extra,
    }
    if not as_of and access.can_act:
        heads = ([{"version": head.version, "ordinal": head.ordinal, "value": head.value,
                   "status": head.status}] if head.version else [])
        context["winners"] = heads + head.alternatives  # the choices of resolve
        context["retractable"], _more = retract_choices(cell, "")
        context["restorable"] = restorable_versions(cell=cell)  # Restore (issue 17)
        context["seen_op"] = last_operation_id(access.namespace, cell.key)
    return context


# --- graph and timeline -----------------------------------------------------------------------


def graph_json(cell: Cell, *, ns: str, around: int | None, limit: int, side: str | None,
               as_of: datetime | None) -> dict[str, Any]:
    """A window of the graph as cell.js draws it: the typed edges, an ``applied_to`` link
    from each operation to the version it created or targeted, observation pages, and for
    each operation the links to memory just before and just after it."""
    graph = mh.graph_window(cell, around=around, limit=limit, side=side, as_of=as_of)
    version_ids = {n["id"] for n in graph["nodes"] if n["kind"] == "version"}
    derived = [{"source": n["id"], "target": f"v{n['version']}", "type": "applied_to"}
               for n in graph["nodes"] if n["kind"] == "operation" and n.get("version")
               and f"v{n['version']}" in version_ids]
    # An observation that supports no version shown (a retraction's "reported in error") is
    # linked to the operations it caused, so it does not float unexplained.
    supporting = {e["target"] for e in graph["edges"] if e["type"] == "supported_by"}
    evidence_ids = {n["id"] for n in graph["nodes"] if n["kind"] == "evidence"}
    derived += [{"source": n["id"], "target": f"e{n['evidence']}", "type": "caused_by"}
                for n in graph["nodes"] if n["kind"] == "operation" and n.get("evidence")
                and f"e{n['evidence']}" in evidence_ids - supporting]
    page = reverse("explorer:cell", args=[ns, cell.key])
    for node in graph["nodes"]:
        if node["kind"] == "evidence":
            node["page"] = reverse("explorer:observation", args=[ns, node["observation"]])
            node["observation_url"] = reverse("api-observation", args=[ns, node["observation"]])
        elif node["kind"] == "operation" and node.get("created_at"):
            at = node["created_at"]
            node["asof_before"] = f"{page}?{urlencode({'as_of': as_of_param(at - TICK)})}"
            node["asof_after"] = f"{page}?{urlencode({'as_of': as_of_param(at)})}"
    return {"key": cell.key, "nodes": graph["nodes"], "edges": graph["edges"],
            "derived": derived, "window": graph["window"],
            "head": f"v{cell.head_id}" if cell.head_id and not as_of else None,
            "as_of": as_of_param(as_of) if as_of else None}


def timeline_json(cell: Cell, *, as_of: datetime | None) -> dict[str, Any]:
    """The whole chain in TIMELINE_BUCKETS time buckets, counted by status in SQL."""
    return mh.status_timeline(cell, buckets=TIMELINE_BUCKETS, as_of=as_of)


