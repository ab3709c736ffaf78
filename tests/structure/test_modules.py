"""The application's modules stay a graph one can read: no import cycles between them, no
module importing another's private (``_x``) names, no function-local import standing in for
a module-level one that would close a cycle, and no module over 450 lines (a long module is
split by responsibility, never exempted).

The graph is read from the source (ast), at module level; imports under ``TYPE_CHECKING``
name types only and never run, so they are not edges (their private names still count)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("memory", "explorer", "pmem_site", "pmem_mcp", "pmem_client")
MAX_LINES = 450


def _tool():
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "tools/import_graph.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["import_graph"] = module  # dataclasses look their module up while building
    spec.loader.exec_module(module)
    return module


graph_tool = _tool()


def test_the_module_graph_has_no_cycle():
    edges = graph_tool.graph(PACKAGES, ROOT)
    assert edges, "the graph was read"
    assert graph_tool.cycles(edges) == []


def test_the_graph_reader_finds_a_cycle_and_a_private_import(tmp_path):
    # The checks above can fail: a made-up package with both faults is caught.
    package = tmp_path / "knot"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from knot.b import helper\n")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\nfrom .a import helper as _unused\n"
        "if TYPE_CHECKING:\n    from .c import _Hidden\n\ndef helper():\n"
        "    from .c import thing\n")
    (package / "c.py").write_text("from .b import helper\n_Hidden = thing = 1\n")
    edges = graph_tool.graph(["knot"], tmp_path)
    assert graph_tool.cycles(edges) == [["knot.a", "knot.b"]]
    assert graph_tool.private_imports(edges) == ["knot.b:4: imports _Hidden from knot.c"]
    assert graph_tool.dodges(edges) == [
        "knot.b:7: imports knot.c inside a function (at module level it closes a cycle)"]


def test_no_module_imports_another_modules_private_names():
    assert graph_tool.private_imports(graph_tool.graph(PACKAGES, ROOT)) == []


def test_no_function_local_import_dodges_a_cycle():
    assert graph_tool.dodges(graph_tool.graph(PACKAGES, ROOT)) == []


def test_no_module_is_over_450_lines():
    long = {str(path.relative_to(ROOT)): n
            for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))
            if "migrations" not in path.parts
            and (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert long == {}
