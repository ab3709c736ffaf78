"""`make lint`: no class in memory/ over 200 lines, no function over 60 (migrations aside:
they are generated schema, reviewed as such). Counts lines from the ``def``/``class`` line
(decorators included) to the last line of the body, docstrings and comments included."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

MAX_CLASS = 200
MAX_FUNCTION = 60


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


def main(roots: list[str]) -> int:
    problems = [problem for root in roots for path in sorted(Path(root).rglob("*.py"))
                if "migrations" not in path.parts for problem in oversized(path)]
    print("\n".join(problems) or f"sizes: every class ≤ {MAX_CLASS} lines, "
                                   f"every function ≤ {MAX_FUNCTION}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["memory"]))
