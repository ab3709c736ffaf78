"""The TypeScript client (clients/typescript): its types are the served schema's, it compiles
with the pinned TypeScript, and its own tests (Node's test runner) pass against a live server
and a real worker."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memory.services import namespace_create, token_create

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "clients" / "typescript"
TSC = ROOT / "node_modules" / ".bin" / "tsc"
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(NODE is None or not TSC.exists(),
                                reason="Node and node_modules (npm ci) are installed by make")


def test_the_types_are_the_served_schemas(client, db):
    from tools.ts_types import generated

    assert (PACKAGE / "src" / "schema.ts").read_text() == generated(), (
        "clients/typescript/src/schema.ts is stale: run .venv/bin/python tools/ts_types.py")
    served = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert served.status_code == 200 and '"/api/v1/whoami/"' in served.content.decode()


def test_the_shipped_build_is_the_sources_compiled(tmp_path: Path):
    """dist/ is committed, so that ``npm install ./clients/typescript`` (a link, nothing
    built) gives a package that imports: it must be what the sources compile to."""
    out = tmp_path / "dist"
    done = subprocess.run([str(TSC), "-p", str(PACKAGE), "--outDir", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    built = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    shipped = {p.relative_to(PACKAGE / "dist"): p.read_bytes()
               for p in (PACKAGE / "dist").rglob("*") if p.is_file()}
    assert built == shipped, "clients/typescript/dist is stale: run npm run build there"


def test_npm_install_of_the_folder_in_a_fresh_project_imports(tmp_path: Path):
    """The README's line, from a new project: ``npm install <checkout>/clients/typescript``,
    then ``import { Client } from "pmem-client"`` (no registry: the package has no runtime
    dependency)."""
    app = tmp_path / "app"
    app.mkdir()
    (app / "package.json").write_text('{"name": "app", "version": "1.0.0", "type": "module"}')
    npm = shutil.which("npm")
    assert npm is not None
    done = subprocess.run([npm, "install", "--offline", "--no-audit", "--no-fund",
                           str(PACKAGE)], capture_output=True, text=True, timeout=300, cwd=app)
    assert done.returncode == 0, done.stdout + done.stderr
    (app / "main.mjs").write_text(
        'import { Client, NotFound } from "pmem-client";\n'
        'const c = new Client({ baseUrl: "http://127.0.0.1:9", token: "t" });\n'
        'console.log(typeof Client, typeof NotFound, typeof c.answer, typeof c.recall);\n')
    ran = subprocess.run([NODE, "main.mjs"], capture_output=True, text=True, timeout=60,
                         cwd=app)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["function"] * 4


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package, built afresh."""
    copy = tmp_path_factory.mktemp("ts") / "pmem-client"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("dist", "node_modules"))
    done = subprocess.run([str(TSC), "-p", str(copy)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (copy / "dist" / "index.d.ts").exists()
    return copy


def _token(name: str) -> str:
    return token_create(namespace=namespace_create(name=f"{name}-{os.getpid()}"),
                        client="ts", scope="review").key


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_node_tests_pass_against_a_live_server(package: Path, api_url: str):
    env = {**os.environ, "PMEM_URL": api_url, "PMEM_TOKEN": _token("ts-client"),
           "PMEM_APP_PREFIX": "tsapp-",
           "PMEM_APP_TOKEN": token_create(namespace_prefix="tsapp-", client="ts-app",
                                          scope="write").key,
           "PMEM_REVIEW_APP_PREFIX": "tsrev-",
           "PMEM_REVIEW_APP_TOKEN": token_create(namespace_prefix="tsrev-", client="ts-rev",
                                                 scope="review").key}
    ran = subprocess.run([NODE, "--test", str(package / "test" / "client.test.mjs")],
                         capture_output=True, text=True, timeout=600, env=env, cwd=package)
    sys.stdout.write(ran.stdout[-4000:])
    assert ran.returncode == 0, ran.stdout[-8000:] + ran.stderr[-2000:]
    assert "# fail 0" in ran.stdout and "# pass 9" in ran.stdout


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_the_readmes_example_runs(package: Path, api_url: str):
    env = {**os.environ, "PMEM_URL": api_url, "PMEM_TOKEN": _token("ts-example")}
    ran = subprocess.run([NODE, str(package / "examples" / "agent.mjs")], capture_output=True,
                         text=True, timeout=300, env=env, cwd=package)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    lines = ran.stdout.splitlines()
    assert "user_city = Lisbon" in lines and "now: Paris" in lines
    assert lines[-3:] == ["v2 Lisbon revoked", "v1 Paris active", "as of start: empty"]
