from __future__ import annotations

from django.apps import AppConfig


class PmemMcpConfig(AppConfig):
    """Holds the ``pmem_mcp`` management command (stdio); no models."""

    name = "pmem_mcp"
    verbose_name = "P-Mem MCP server"
