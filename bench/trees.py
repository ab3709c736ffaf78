"""One measurement of another tree (an older checkout) beside this one: a benchmark script of
this checkout, run in a process of its own from that tree's directory, on a PostgreSQL and
Redis of its own, with this checkout's interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent  # this checkout's bench package

#: Variables that would point the child at this checkout's database or broker.
_NOT_INHERITED = ("PMEM_TEST_DB_NAME", "DATABASE_URL", "REDIS_URL")


def _bench_from_here() -> str:
    """Python that makes ``bench`` this checkout's package before anything imports it."""
    return (f"import importlib.util as u; spec = u.spec_from_file_location('bench', "
            f"{str(HERE / '__init__.py')!r}, submodule_search_locations=[{str(HERE)!r}]); "
            "bench = u.module_from_spec(spec); sys.modules['bench'] = bench; "
            "spec.loader.exec_module(bench); ")


def run_in_tree(script: Path, argv: list[str], *, tree: Path, data: Path, out: Path,
                bench_from_here: bool = False) -> dict[str, Any]:
    """Run ``script`` as ``__main__`` with ``argv`` from ``tree``'s directory, its packages
    first on the path and its PostgreSQL and Redis under ``data`` (stopped after); the JSON
    it wrote to ``out``. With ``bench_from_here`` the ``bench`` package is this checkout's
    (the harness), whatever the tree: only ``memory`` and ``pmem_site`` are the tree's."""
    env = {k: v for k, v in os.environ.items() if k not in _NOT_INHERITED}
    env.update({"PMEM_DATA_DIR": str(data), "PYTHONPATH": str(tree),
                "DJANGO_SETTINGS_MODULE": "pmem_site.settings", "PMEM_LOG_LEVEL": "WARNING"})
    code = ("import runpy, sys; " + (_bench_from_here() if bench_from_here else "")
            + f"sys.argv = {[script.stem, *argv]!r}; "
            f"runpy.run_path({str(script.resolve())!r}, run_name='__main__')")
    try:
        subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, check=True)
    finally:  # its PostgreSQL and Redis go with it
        subprocess.run([sys.executable, "-m", "pmem_site.embedded", "stop"], cwd=tree, env=env,
                       check=False, capture_output=True)
    return dict(json.loads(out.read_text()))
