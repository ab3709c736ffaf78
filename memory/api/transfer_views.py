"""``GET /api/v1/namespaces/{ns}/export/``: the namespace as ``pmem_export`` writes it, streamed
(CONTRACT "Export, import and backup of a namespace"; docs/export-format.md)."""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request

from memory.services.transfer import export_chunks

from .base import NamespaceView
from .params import zero_or_one
from .permissions import ReviewScope

NDJSON = "application/x-ndjson"


def gzipped(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """The chunks as one gzip stream, compressed as they come."""
    packer = zlib.compressobj(6, zlib.DEFLATED, 31)  # 31: a gzip header and trailer
    for chunk in chunks:
        packed = packer.compress(chunk)
        if packed:
            yield packed
    yield packer.flush()


class NamespaceExportView(NamespaceView):
    scopes = {"GET": ReviewScope}

    @extend_schema(
        operation_id="namespace_export",
        summary="The whole namespace with its provenance, as NDJSON (what pmem_export writes)",
        description="A header line `{format, version, namespace, exported_at, counts}`, then one "
                    "JSON object per record (docs/export-format.md), streamed from one "
                    "snapshot. Import it with `manage.py pmem_import FILE`. Tokens, sessions "
                    "and passwords are never in it.",
        parameters=[OpenApiParameter("gzip", int, description="1: gzip-compressed")],
        responses={(200, NDJSON): OpenApiResponse(OpenApiTypes.STR, description="NDJSON"),
                   (200, "application/gzip"): OpenApiResponse(OpenApiTypes.BINARY)},
    )
    def get(self, request: Request, ns: str) -> StreamingHttpResponse:
        namespace = self.namespace(request, ns)
        packed = zero_or_one(request.query_params, "gzip")
        chunks: Iterable[bytes] = export_chunks(namespace)
        name = f"{namespace.name}.pmem.ndjson"
        content_type = NDJSON
        if packed:
            chunks, name, content_type = gzipped(chunks), f"{name}.gz", "application/gzip"
        response = StreamingHttpResponse(chunks, content_type=content_type)
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        response["Cache-Control"] = "no-store"
        return response
