"""`make lint`: no class in memory/ over 200 lines, no function over 60 (migrations aside:
they are generated schema, reviewed as such). Counts lines from the ``def``/``class`` line
(decorators included) to the last line of the body, docstrings and comments included.

With ``--modules DIR…``: no Python module under those folders over 450 lines and no script
over 350, with no exemption: a module that grows past that is split by responsibility."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

MAX_CLASS = 200
MAX_FUNCTION = 60
MAX_MODULE = {".py": 450, ".js": 350}


def oversized(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            length = (node.end_lineno or node.lineno) - start + 1
            limit = MAX_CLASS if isinstance(node, ast.ClassDef) else MAX_FUNCTION
            if length > limit:
                found.append(f"{path}:{start}: {node.name} is {length} lines (at most {limit})")
    return found


def long_module(path: Path) -> str | None:
    lines = path.read_text().splitlines()
    limit = MAX_MODULE[path.suffix]
    if len(lines) <= limit:
        return None
    return f"{path}: {len(lines)} lines (at most {limit})"


def main(args: list[str]) -> int:
    roots = args[:args.index("--modules")] if "--modules" in args else args
    module_roots = args[args.index("--modules") + 1:] if "--modules" in args else []
    problems = [problem for root in roots or ["memory"] for path in sorted(Path(root).rglob("*.py"))
                if "migrations" not in path.parts for problem in oversized(path)]
    problems += [problem for root in module_roots for suffix in MAX_MODULE
                 for path in sorted(Path(root).rglob(f"*{suffix}"))
                 if "migrations" not in path.parts
                 for problem in [long_module(path)] if problem]
    print("\n".join(problems) or f"sizes: every class ≤ {MAX_CLASS} lines, "
                                   f"every function ≤ {MAX_FUNCTION}"
                                   + (", every module ≤ 450 lines, every script ≤ 350"
                                      if module_roots else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
