"""Every read of the provenance graph, split by what it reads; each module shapes its rows once.
The API (:mod:`memory.api`), the explorer (:mod:`explorer`), :mod:`memory.reads`, the
management commands and the benchmarks read through this package's modules and nowhere else
(``pyproject.toml``'s import contracts hold the API and the explorer to it); each caller imports
the module it reads from, so a call site names the read it makes — this file re-exports nothing.

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
