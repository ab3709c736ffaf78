"""The development SECRET_KEY is generated once per data directory (mode 0600), never a
constant; under PMEM_HTTPS=1 it must be given."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
import subprocess
import sys
from pathlib import Path

from pmem_site.secret_key import FILE_NAME, development_secret_key

ROOT = Path(__file__).resolve().parents[2]
OLD_CONSTANT = "pmem-dev-only-insecure-key-change-me-in-production"


def test_a_key_is_made_once_per_data_directory_and_kept_private(tmp_path: Path) -> None:
    first = development_secret_key(tmp_path)
    development_secret_key.cache_clear()  # as a new process would
    assert len(first) >= 50 and first != OLD_CONSTANT
    assert development_secret_key(tmp_path) == first  # kept across restarts
    assert stat.S_IMODE((tmp_path / FILE_NAME).stat().st_mode) == 0o600
    other = tmp_path / "other"
    other.mkdir()
    assert development_secret_key(other) != first  # every installation its own
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def _key_in_child(data_dir: str, out: multiprocessing.Queue) -> None:
    out.put(development_secret_key(Path(data_dir)))


def test_processes_starting_at_once_agree_on_one_key(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    children = [context.Process(target=_key_in_child, args=(str(tmp_path), out))
                for _ in range(8)]
    for child in children:
        child.start()
    keys = {out.get(timeout=30) for _ in children}
    for child in children:
        child.join(timeout=30)
    assert keys == {(tmp_path / FILE_NAME).read_text().strip()}


def _settings(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    code = ("import django, json; django.setup(); from django.conf import settings as s; "
            "import pathlib; made = pathlib.Path(s.PMEM_DATA_DIR).exists(); "
            "print(json.dumps([made, str(s.SECRET_KEY), s.PMEM_HTTPS]))")
    base = {k: v for k, v in os.environ.items() if k not in ("PMEM_SECRET_KEY", "PMEM_HTTPS")}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False,
        env={**base, "DJANGO_SETTINGS_MODULE": "pmem_site.settings",
             "PMEM_DATA_DIR": str(tmp_path),
             # nothing starts the embedded servers: the settings only name them
             "DATABASE_URL": "postgresql://nobody@127.0.0.1:9/none", "REDIS_URL": "redis://127.0.0.1:9/0",
             **env})


def test_settings_use_the_data_directorys_key_made_at_first_use(tmp_path: Path) -> None:
    data = tmp_path / "data"
    done = _settings(data)
    assert done.returncode == 0, done.stderr
    made_on_import, key, https = json.loads(done.stdout.strip().splitlines()[-1])
    assert not made_on_import  # importing the settings made nothing; signing did
    assert key == (data / FILE_NAME).read_text().strip() and https is False
    assert json.loads(_settings(data).stdout.strip().splitlines()[-1])[1] == key


def test_https_without_a_secret_key_is_refused(tmp_path: Path) -> None:
    done = _settings(tmp_path, PMEM_HTTPS="1")
    assert done.returncode != 0
    assert "ImproperlyConfigured" in done.stderr and "PMEM_SECRET_KEY" in done.stderr
    assert not (tmp_path / FILE_NAME).exists()
    done = _settings(tmp_path, PMEM_HTTPS="1", PMEM_SECRET_KEY="s" * 60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1])[1:] == ["s" * 60, True]
