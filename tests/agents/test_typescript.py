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


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package, built (dist/ is not committed: npm run build makes it)."""
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
    assert "# fail 0" in ran.stdout and "# pass 7" in ran.stdout


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
