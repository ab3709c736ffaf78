"""Every read of the provenance graph, split by what it reads; each module shapes its rows once.
The API (:mod:`memory.api`), the explorer (:mod:`explorer`), :mod:`memory.reads`, the
management commands and the benchmarks read through this package and nowhere else
(``pyproject.toml``'s import contracts hold the API and the explorer to it).

- :mod:`~memory.selectors.cells`: a cell — the point read, the materialized cell, now or as of
  T, pages of cells;
- :mod:`~memory.selectors.history`: a key's versions page by page (keysets, cursors, value
  search), the head, alternatives and counts as of T;
- :mod:`~memory.selectors.graph`: a window of a key's provenance graph, every node shaped there;
- :mod:`~memory.selectors.timeline`: the status timeline, where a jump lands, the as-of steps;
- :mod:`~memory.selectors.versions`: one version's provenance, the versions a retraction or a
  Restore may name, two versions side by side, the history export;
- :mod:`~memory.selectors.search`: an agent's reads by meaning (frontier, raw), the vector search;
- :mod:`~memory.selectors.filtered`: the frontier read narrowed by facts' metadata, and a read
  cut at a relevance score;
- :mod:`~memory.selectors.evidence`: the evidence read (observations by the cosine fused with
  the query's words, PostgreSQL full text search);
- :mod:`~memory.selectors.recall`: the frontier read's hybrid ranking (cosine fused with the
  query's exact words);
- :mod:`~memory.selectors.frontier`: a namespace's cells page by page (the explorer's frontier,
  the frontier as of T, the review queue, the frontier export);
- :mod:`~memory.selectors.log`: the operation log, what changed since, Undo offers, the live
  fingerprint;
- :mod:`~memory.selectors.observations`: observations whole or as list rows;
- :mod:`~memory.selectors.access`: namespaces, roles, tokens, members, trust, the audit log;
- :mod:`~memory.selectors.shapes`: what several reads show alike (text cuts, evidence heads).

A read that refuses a parameter raises :class:`memory.domain.BadParameter` naming it.
"""

from __future__ import annotations

from .access import (
    application_token_rows,
    audit_list,
    member_role,
    member_roles,
    members_list,
    namespace_named,
    source_trust_list,
    token_in,
    token_row,
    token_rows,
    tokens_list,
    visible_namespaces,
)
from .cells import (
    SNIPPET_SOURCE_CHARS,
    CellAsOf,
    CellDetail,
    CellHead,
    CellValue,
    cell_aliases,
    cell_as_of,
    cell_detail,
    cell_head,
    cell_lookup,
    cell_state,
    cell_summary,
    cell_value,
    cells_full,
    cells_list,
    cells_page,
    narrow_cells,
    versions_with_value,
)
from .evidence import EVIDENCE_HEADER, evidence_read
from .filtered import EXACT_AT_MOST, frontier_read_filtered, with_min_score
from .fresh import expiry_checked
from .frontier import (
    FrontierAsOfRow,
    FrontierPage,
    FrontierPageRow,
    NamespaceRow,
    contested_cells,
    default_sort,
    frontier_as_of,
    frontier_page,
    frontier_rows,
    namespace_overview,
    open_contests,
    search_terms,
)
from .graph import (
    PER_VERSION,
    WINDOW_DEFAULT,
    WINDOW_MAX,
    graph_window,
)
from .history import (
    HISTORY_DEFAULT,
    HISTORY_MAX,
    SEARCH_COUNT_CAP,
    SUPPORT_COUNT_CAP,
    Entry,
    HistoryPage,
    alternatives,
    count_as_of,
    cursor_for,
    first_pages,
    head_as_of,
    history_page,
    parse_cursor,
    support_as_of,
    version_status_at,
)
from .log import (
    LogFilters,
    LogPage,
    changes_since,
    closed_contests,
    last_operation_id,
    live_fingerprint,
    log_page,
    log_rows,
    operation_key,
    operations_list,
    operations_page,
    undo_offer,
)
from .namespaces import namespaces_page, reachable_namespaces
from .observations import (
    ObservationPage,
    evidence_effects,
    extraction_body,
    in_flight,
    observation_detail,
    observation_in,
    observation_note,
    observation_page,
    observation_state,
    observation_when_settled,
    observation_yield,
    observations_unsettled,
    observations_with_drops,
    observations_without_facts,
)
from .recall import frontier_hybrid_read
from .search import (
    DISCLOSED_HISTORY,
    FRONTIER_EF_SEARCH,
    FRONTIER_HEADER,
    ORDERED_HEADER,
    RAW_HEADER,
    ReadResult,
    evidence_for_pruning,
    evidence_line,
    frontier_candidates,
    frontier_read,
    frontier_read_as_of,
    frontier_render,
    query_vector,
    raw_read,
)
from .shapes import (
    GRAPH_TEXT_CHARS,
    LIST_TEXT_CHARS,
    RAW_OUTPUT_CHARS,
    cell_status,
    evidence_heads,
)
from .timeline import (
    Steps,
    op_steps,
    resolve_jump,
    status_timeline,
    version_at,
)
from .versions import (
    Provenance,
    diff_choices,
    history_rows,
    restorable_versions,
    retract_choices,
    retraction_notes,
    version_choices,
    version_details,
    version_provenance,
    version_side,
)

__all__ = [
    "application_token_rows",
    "EXACT_AT_MOST",
    "frontier_read_filtered",
    "with_min_score",
    "narrow_cells",
    "version_details",
    "frontier_hybrid_read",
    "EVIDENCE_HEADER", "evidence_read",
    "frontier_candidates",
    "frontier_render",
    "query_vector",
    "CellAsOf", "CellDetail", "CellHead", "CellValue", "DISCLOSED_HISTORY", "Entry",
    "FRONTIER_EF_SEARCH", "FRONTIER_HEADER", "FrontierAsOfRow", "FrontierPage",
    "FrontierPageRow", "GRAPH_TEXT_CHARS", "HISTORY_DEFAULT", "HISTORY_MAX", "HistoryPage",
    "LIST_TEXT_CHARS", "LogFilters", "LogPage", "NamespaceRow", "ORDERED_HEADER",
    "ObservationPage", "PER_VERSION", "Provenance", "RAW_HEADER", "RAW_OUTPUT_CHARS",
    "ReadResult", "SEARCH_COUNT_CAP", "SNIPPET_SOURCE_CHARS", "SUPPORT_COUNT_CAP", "Steps",
    "WINDOW_DEFAULT", "WINDOW_MAX", "alternatives", "audit_list", "cell_aliases", "cell_as_of",
    "cell_detail", "cell_head", "cell_lookup", "cell_state", "cell_status", "cell_summary",
    "cell_value", "cells_full", "cells_list", "cells_page", "changes_since", "closed_contests",
    "contested_cells", "count_as_of", "cursor_for", "default_sort", "diff_choices",
    "evidence_effects", "expiry_checked", "evidence_for_pruning", "evidence_heads", "evidence_line",
    "extraction_body", "first_pages", "frontier_as_of", "frontier_page", "frontier_read",
    "frontier_read_as_of", "frontier_rows", "graph_window", "head_as_of", "history_page",
    "history_rows", "in_flight", "last_operation_id", "live_fingerprint", "log_page",
    "log_rows", "member_role", "member_roles", "members_list", "namespace_named",
    "namespace_overview", "namespaces_page", "observation_detail", "observation_in", "observation_note",
    "observation_page", "observation_state", "observation_when_settled", "observation_yield",
    "observations_unsettled", "observations_with_drops", "observations_without_facts",
    "op_steps", "open_contests", "operation_key", "operations_list", "operations_page", "parse_cursor",
    "raw_read", "reachable_namespaces", "resolve_jump", "restorable_versions", "retract_choices", "retraction_notes",
    "search_terms",
    "source_trust_list", "status_timeline", "support_as_of", "token_in", "token_row",
    "token_rows", "tokens_list", "undo_offer", "version_at", "version_choices",
    "version_provenance", "version_side", "version_status_at", "versions_with_value",
    "visible_namespaces",
]
