"""The module-level import graph of the application's packages, read from their source (ast):
import cycles between modules, and imports of another module's private (``_x``) names.

Imports under ``if TYPE_CHECKING:`` are left out (they name types, and never run), and so are
imports inside functions: the graph is what importing a module executes. A function-local
import that dodges a cycle is found by ``--local``: it is listed with the cycle it would close.

``python tools/import_graph.py memory explorer …`` prints what it finds and exits 1 when there
is any cycle or private import."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOTS = ("memory", "explorer", "pmem_site", "pmem_mcp", "pmem_client")


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the module imported (or whose name is imported)
    names: tuple[str, ...]  # the names taken from it ("from target import names")
    line: int
    local: bool  # inside a function: runs when called, not when the module is imported
    typing: bool = False  # under ``if TYPE_CHECKING:``: never runs


def module_name(path: Path, base: Path) -> str:
    parts = list(path.relative_to(base).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(roots: Iterable[str], base: Path) -> dict[str, Path]:
    found = {}
    for root in roots:
        for path in sorted((base / root).rglob("*.py")):
            if "migrations" not in path.parts:
                found[module_name(path, base)] = path
    return found


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _walk(node: ast.AST, local: bool, typing: bool = False,
          ) -> Iterator[tuple[ast.AST, bool, bool]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _type_checking(child.test):
            for inner in child.body:
                yield inner, local, True
                yield from _walk(inner, local, True)
            for other in child.orelse:
                yield other, local, typing
                yield from _walk(other, local, typing)
            continue
        inner = local or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        yield child, inner, typing
        yield from _walk(child, inner, typing)


def imports(name: str, path: Path, known: dict[str, Path]) -> list[Import]:
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node, local, typing in _walk(tree, False):
        if isinstance(node, ast.Import):
            found += [Import(name, alias.name, (), node.lineno, local, typing)
                      for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - node.level + 1]
                target = ".".join([*anchor, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            names = tuple(alias.name for alias in node.names)
            # "from package import module": an import of the submodule.
            plain = [n for n in names if f"{target}.{n}" not in known]
            found += [Import(name, f"{target}.{n}", (), node.lineno, local, typing)
                      for n in names if f"{target}.{n}" in known]
            if plain:
                found.append(Import(name, target, tuple(plain), node.lineno, local, typing))
    return found


def graph(roots: Iterable[str] = ROOTS, base: Path | None = None) -> list[Import]:
    base = base or Path(__file__).resolve().parent.parent
    known = modules(roots, base)
    return [i for name, path in known.items() for i in imports(name, path, known)
            if i.target in known]


def private_imports(edges: Iterable[Import]) -> list[str]:
    """Imports of a name another module keeps private (``_x``; dunders aside), wherever they
    are: at module level, in a function, or for type checking only."""
    return [f"{e.source}:{e.line}: imports {', '.join(n for n in e.names if _private(n))}"
            f" from {e.target}"
            for e in edges if any(_private(n) for n in e.names)]


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def cycles(edges: Iterable[Import]) -> list[list[str]]:
    """Each strongly connected group of modules (more than one, or one importing itself) of
    the graph of module-level imports. A package importing its own submodule (its
    ``__init__`` re-exporting) is not a cycle unless the submodule imports the package back."""
    out: dict[str, set[str]] = {}
    for e in edges:
        if not e.local and not e.typing:
            out.setdefault(e.source, set()).add(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's, iterative enough for these depths
        index[node] = low[node] = len(index)
        stack.append(node)
        on.add(node)
        for nxt in out.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1 or node in out.get(node, ()):
                groups.append(sorted(group))

    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))
    for node in sorted(out):
        if node not in index:
            visit(node)
    return groups


def dodges(edges: list[Import]) -> list[str]:
    """Function-local imports that a module-level import would turn into a cycle."""
    found = []
    level = [e for e in edges if not e.local and not e.typing]
    for e in edges:
        if e.local and not e.typing and e.source != e.target:
            with_it = [*level, Import(e.source, e.target, e.names, e.line, False)]
            if any(e.source in g and e.target in g for g in cycles(with_it)):
                found.append(f"{e.source}:{e.line}: imports {e.target} inside a function"
                             " (at module level it closes a cycle)")
    return found


def main(args: list[str]) -> int:
    local = "--local" in args
    roots = [a for a in args if not a.startswith("--")] or list(ROOTS)
    edges = graph(roots)
    problems = [f"cycle: {' -> '.join(g)}" for g in cycles(edges)] + private_imports(edges)
    if local:
        problems += dodges(edges)
    print("\n".join(problems) or "imports: no cycle, no private name imported")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
