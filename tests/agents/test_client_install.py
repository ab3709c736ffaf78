"""The light client install: ``pip install ./pmem_client`` gives a package that depends on
httpx2 alone and works against a live server in a Python that has no Django.

The wheel is built from the package's own pyproject.toml without build isolation (no network);
the fresh virtual environment gets the wheel and, by symbolic link from this environment, the
distributions httpx2 needs — nothing else, so an import of anything the server needs fails."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]


def _closure(name: str) -> set[str]:
    """``name`` and every distribution it needs here (markers evaluated, no extras)."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        dist = metadata.distribution(todo.pop())
        canonical = dist.metadata["Name"].lower().replace("_", "-")
        if canonical in seen:
            continue
        seen.add(canonical)
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen


def _link_distribution(name: str, site: Path) -> None:
    """Make ``name`` importable in ``site`` by linking its top-level files and its metadata."""
    dist = metadata.distribution(name)
    here = Path(sysconfig.get_paths()["purelib"])
    tops = {Path(str(f)).parts[0] for f in dist.files or []
            if not str(f).startswith("..") and "__pycache__" not in str(f)}
    for top in tops:
        source = here / top
        if source.exists() and not (site / top).exists():
            (site / top).symlink_to(source)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    source = out / "src" / "pmem_client"
    shutil.copytree(ROOT / "pmem_client", source,
                    ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--no-build-isolation", "-w", str(out), str(source)], check=True)
    return next(out.glob("pmem_client-*.whl"))


def test_the_wheel_depends_on_httpx2_alone(wheel: Path):
    with zipfile.ZipFile(wheel) as archive:
        meta = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        text = archive.read(meta).decode()
        modules = {Path(n).parts[0] for n in archive.namelist()
                   if not n.split("/")[0].endswith(".dist-info")}
    requires = [line.split(":", 1)[1].strip() for line in text.splitlines()
                if line.startswith("Requires-Dist:")]
    unconditional = [r for r in requires if "extra ==" not in r]
    assert [Requirement(r).name for r in unconditional] == ["httpx2"]
    assert {Requirement(r).name for r in requires} <= {"httpx2", "langgraph"}
    assert modules == {"pmem_client"}  # the server's packages are not in it


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_python_without_django_installs_it_and_talks_to_the_server(
        wheel: Path, tmp_path: Path, api_url: str, agent):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True).stdout.strip())
    with zipfile.ZipFile(wheel) as archive:  # a pure-Python wheel installs by unpacking
        archive.extractall(site)
    for name in _closure("httpx2"):
        _link_distribution(name, site)
    ns, token = agent(client="light")
    script = (
        "import importlib.util, sys\n"
        "for server_part in ('django', 'celery', 'rest_framework', 'memory'):\n"
        "    assert importlib.util.find_spec(server_part) is None, server_part\n"
        "from pmem_client import Client\n"
        "with Client(sys.argv[1], sys.argv[2]) as memory:\n"
        "    memory.remember(facts=[{'key': 'kettle_state', 'value': 'on'}])\n"
        "    memory.remember(facts=[{'key': 'kettle_state', 'value': 'off'}])\n"
        "    cell = memory.get_fact('kettle_state')\n"
        "    print(memory.namespace, cell.value, [h.value for h in cell.history])\n")
    ran = subprocess.run([python, "-I", "-c", script, api_url, token], capture_output=True,
                         text=True, timeout=120, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split(None, 2) == [ns.name, "off", "['off', 'on']\n"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_pip_install_of_the_folder_into_a_fresh_venv_works_as_the_readme_says(
        tmp_path: Path, api_url: str, agent):
    """``pip install ./pmem_client`` in a new virtual environment, as a builder types it (its
    one dependency, httpx2, and the build backend come from the package index)."""
    source = tmp_path / "checkout" / "pmem_client"
    shutil.copytree(ROOT / "pmem_client", source,
                    ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    installed = subprocess.run([python, "-m", "pip", "install", "--quiet", "./pmem_client"],
                               capture_output=True, text=True, timeout=600,
                               cwd=source.parent)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    ns, token = agent(client="pip")
    script = ("import sys\nfrom pmem_client import Client\n"
              "with Client(sys.argv[1], sys.argv[2]) as memory:\n"
              "    memory.remember(facts=[{'key': 'lamp', 'value': 'on'}])\n"
              "    print(memory.get_fact('lamp').value)\n")
    ran = subprocess.run([python, "-I", "-c", script, api_url, token], capture_output=True,
                         text=True, timeout=120, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "on"
