"""Streamed exports: a key's history, the frontier and the (filtered) operation log, as CSV or
JSON, produced row by row as a server-side cursor delivers them."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.serializers.json import DjangoJSONEncoder
from django.http import Http404, HttpRequest, StreamingHttpResponse
from django.views.decorators.http import require_GET

from explorer.access import namespace_access
from explorer.pages.cell import load_cell
from explorer.pages.operations import log_filters
from memory.domain.spreadsheet import inert_cell
from memory.selectors.downloads import (
    FRONTIER_DOWNLOAD_FIELDS,
    HISTORY_DOWNLOAD_FIELDS,
    LOG_DOWNLOAD_FIELDS,
    frontier_download,
    history_download,
    log_download,
)


class _Echo:
    """A file-like object whose write returns the line: csv.writer then yields strings."""

    def write(self, value: str) -> str:
        return value


def _stream(rows: Iterable[tuple[Any, ...]], fields: tuple[str, ...], fmt: str,
            filename: str) -> StreamingHttpResponse:
    """CSV or JSON (an array of objects), produced row by row as the cursor delivers them."""
    if fmt == "csv":
        writer = csv.writer(_Echo())
        body: Iterator[str] = (writer.writerow(r) for r in _with_header(fields, rows))
        content_type = "text/csv; charset=utf-8"
    else:
        body = _json_array(fields, rows)
        content_type = "application/json"
    response = StreamingHttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}.{fmt}"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


def _with_header(fields: tuple[str, ...], rows: Iterable[tuple[Any, ...]]
                 ) -> Iterator[tuple[Any, ...]]:
    """The header, then each row as CSV cells: times in ISO 8601, and no cell a spreadsheet
    would run as a formula (memory.domain.spreadsheet)."""
    yield fields
    for row in rows:
        yield tuple(inert_cell("" if v is None else v.isoformat() if hasattr(v, "isoformat")
                               else v) for v in row)


def _json_array(fields: tuple[str, ...], rows: Iterable[tuple[Any, ...]]) -> Iterator[str]:
    yield "["
    sep = ""
    for row in rows:
        yield sep + json.dumps(dict(zip(fields, row, strict=True)), cls=DjangoJSONEncoder,
                               ensure_ascii=False)
        sep = ",\n"
    yield "]\n"


def _fmt(fmt: str) -> str:
    if fmt not in ("csv", "json"):
        raise Http404("csv or json")
    return fmt


@login_required
@require_GET
def export_history(request: HttpRequest, ns: str, key: str, fmt: str) -> StreamingHttpResponse:
    access = namespace_access(request.user, ns)
    cell = load_cell(access, key)
    return _stream(history_download(cell=cell), HISTORY_DOWNLOAD_FIELDS, _fmt(fmt),
                   f"{access.namespace.name}-{cell.key}-history")


@login_required
@require_GET
def export_frontier(request: HttpRequest, ns: str, fmt: str) -> StreamingHttpResponse:
    access = namespace_access(request.user, ns)
    return _stream(frontier_download(namespace=access.namespace), FRONTIER_DOWNLOAD_FIELDS,
                   _fmt(fmt),
                   f"{access.namespace.name}-frontier")


@login_required
@require_GET
def export_log(request: HttpRequest, ns: str, fmt: str) -> StreamingHttpResponse:
    access = namespace_access(request.user, ns)
    rows = log_download(namespace=access.namespace, filters=log_filters(request))
    return _stream(rows, LOG_DOWNLOAD_FIELDS, _fmt(fmt), f"{access.namespace.name}-operations")
