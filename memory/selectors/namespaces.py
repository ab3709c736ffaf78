"""The namespaces a caller reaches, as ``GET /api/v1/namespaces/`` lists them (SPEC §13):
an application token those under its prefix, a namespace's token its own, a person those they
are a member of (every one for a superuser). Keyset pages by name; each row's counts come from
indexes (cell_key_unique, evidence_seq_unique, op_log_idx), never a scan of the namespace."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, OuterRef, QuerySet, Subquery
from django.db.models.functions import Greatest

from memory.models import ApiToken, Cell, Evidence, Namespace, Operation

from .access import visible_namespaces

#: A namespace being deleted carries a name that starts with this (no valid name does).
HIDDEN_PREFIX = "."


def reachable_namespaces(*, token: ApiToken | None, user: Any = None) -> QuerySet[Namespace]:
    if token is not None:
        if token.namespace_prefix:
            qs = Namespace.objects.filter(name__startswith=token.namespace_prefix)
        else:
            qs = Namespace.objects.filter(pk=token.namespace_id or 0)
    else:
        qs = visible_namespaces(user)
    return qs.exclude(name__startswith=HIDDEN_PREFIX)


def namespaces_page(qs: QuerySet[Namespace], *, after: str | None,
                    limit: int) -> tuple[list[dict[str, Any]], str | None]:
    """A page of ``{name, cells, created_at, last_write_at}`` by name after ``after``, and
    the cursor of the next page (None at the end)."""
    if after:
        qs = qs.filter(name__gt=after)
    cells = (Cell.objects.filter(namespace=OuterRef("pk")).order_by()
             .values("namespace").annotate(n=Count("pk")).values("n"))
    last_seen = (Evidence.objects.filter(namespace=OuterRef("pk")).order_by("-seq")
                 .values("received_at")[:1])
    last_op = (Operation.objects.filter(namespace=OuterRef("pk")).order_by("-id")
               .values("created_at")[:1])
    rows = list(qs.order_by("name").annotate(
        n_cells=Subquery(cells), seen=Subquery(last_seen), op=Subquery(last_op),
    ).annotate(last_write=Greatest("seen", "op"))
        .values("name", "n_cells", "created_at", "last_write")[:limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    out = [{"name": r["name"], "cells": r["n_cells"] or 0, "created_at": r["created_at"],
            # GREATEST skips NULLs in PostgreSQL: either one alone when the other is missing.
            "last_write_at": r["last_write"]} for r in rows]
    return out, (rows[-1]["name"] if more and rows else None)

