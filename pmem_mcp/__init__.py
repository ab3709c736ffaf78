"""pmem_mcp: P-Mem's MCP server (streamable HTTP in :mod:`pmem_mcp.http`, stdio through
``manage.py pmem_mcp``), a thin layer over the HTTP API through :mod:`pmem_client`."""
