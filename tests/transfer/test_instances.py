"""Across instances, and a whole-instance backup (docs/operations.md, "Backup and restore").

A second P-Mem — its own embedded PostgreSQL under another PMEM_DATA_DIR, driven only through
``manage.py`` in subprocesses, as an operator would — imports a namespace this one exported;
every read there equals the original's, and its own export is the same file. Then that
instance is backed up with ``pg_dump``, its database dropped, restored with ``pg_restore``,
and every read is the same again.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from memory.models import Operation
from memory.services import namespace_create
from memory.services.transfer import namespace_export
from tests.support.pgdump import pg_dump_binary
from tests.support.transfer import file_normal_form, reads
from tests.transfer.histories import EVERY_KIND, KEYS, play

pytestmark = pytest.mark.django_db

ROOT = Path(settings.BASE_DIR)
# Reads in the other instance, printed as JSON (the test client needs its test host).
READS = """
import json, os, sys
from datetime import datetime
from django.test.utils import setup_test_environment
setup_test_environment()
from memory.models import Namespace
from tests.support.transfer import reads
name, keys, instants = json.loads(os.environ["PMEM_READS"])
out = reads(Namespace.objects.get(name=name), keys, [datetime.fromisoformat(t) for t in instants])
print(); print(json.dumps(out, default=str))
"""


class Instance:
    """Another P-Mem on this machine: its own PMEM_DATA_DIR, embedded PostgreSQL and all."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("DATABASE_URL", "PMEM_TEST_DB_NAME", "REDIS_URL")}
        # No broker is needed here: name one that is never asked, so none is started.
        self.env.update(PMEM_DATA_DIR=str(home), REDIS_URL="redis://127.0.0.1:9/0")

    def manage(self, *args: str, timeout: int = 600, **env: str) -> str:
        done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT,
                              env={**self.env, **env}, capture_output=True, text=True,
                              timeout=timeout)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    def reads(self, name: str, keys: list[str], instants: list[str]) -> Any:
        out = self.manage("shell", "--no-imports", "-c", READS,
                          PMEM_READS=json.dumps([name, keys, instants]))
        return json.loads(out.strip().splitlines()[-1])

    def pg(self, tool: str, *args: str) -> None:
        binary = pg_dump_binary().parent / tool
        done = subprocess.run([str(binary), "-h", str(self.home / "pg"), "-U", "postgres",
                               *args], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]


@pytest.fixture(scope="module")
def other():
    # Under the checkout's var/ (as root, the embedded server runs as its own user, which
    # must be able to reach its data directory: the tests' tmp_path is root's alone).
    home = ROOT / "var" / f"other-instance-{uuid.uuid4().hex[:8]}"
    instance = Instance(home)
    try:
        instance.manage("migrate", "--verbosity", "0")
        yield instance
    finally:
        subprocess.run([sys.executable, "-m", "pmem_site.embedded", "stop"], cwd=ROOT,
                       env=instance.env, capture_output=True, timeout=120)
        shutil.rmtree(home, ignore_errors=True)


def exported(tmp_dir: Path, name: str) -> tuple[Path, dict[str, Any], list[str]]:
    """A namespace holding every kind of step, exported; its reads; the instants they used."""
    ns = namespace_create(name=name)
    play(ns, EVERY_KIND)
    times = sorted(Operation.objects.filter(namespace=ns).values_list("created_at", flat=True))
    instants = [times[0], times[len(times) // 2], times[-1]]
    before = json.loads(json.dumps(reads(ns, [*KEYS, "town"], instants), default=str))
    path = tmp_dir / f"{name}.ndjson.gz"
    buffer = io.BytesIO()
    namespace_export(ns, buffer)
    path.write_bytes(gzip.compress(buffer.getvalue()))
    return path, before, [t.isoformat() for t in instants]


def test_a_namespace_exported_here_reads_the_same_in_another_instance(other, tmp_path):
    path, before, instants = exported(tmp_path, "travelling")
    shared = other.home / path.name
    shutil.copy(path, shared)
    answer = json.loads(other.manage("pmem_import", str(shared), "--as", "arrived"))
    assert answer["namespace"] == "arrived"
    after = other.reads("arrived", [*KEYS, "town"], instants)
    assert after == json.loads(json.dumps(before).replace("travelling", "arrived"))
    again = other.home / "again.ndjson"
    other.manage("pmem_export", "arrived", "--out", str(again))
    assert file_normal_form(again.read_text()) == file_normal_form(
        gzip.decompress(path.read_bytes()).decode())


def test_a_pg_dump_of_an_instance_restores_to_the_same_reads(other, tmp_path):
    path, _, instants = exported(tmp_path, "backed-up")
    shared = other.home / path.name
    shutil.copy(path, shared)
    other.manage("pmem_import", str(shared))
    before = other.reads("backed-up", [*KEYS, "town"], instants)
    dump = other.home / "pmem.dump"
    # docs/operations.md, "Backup and restore": the same three commands.
    other.pg("pg_dump", "--format=custom", "--file", str(dump), "pmem")
    other.pg("psql", "-d", "postgres", "-c", "DROP DATABASE pmem")
    other.pg("psql", "-d", "postgres", "-c", "CREATE DATABASE pmem")
    other.pg("pg_restore", "--no-owner", "--exit-on-error", "-d", "pmem", str(dump))
    assert other.reads("backed-up", [*KEYS, "town"], instants) == before
