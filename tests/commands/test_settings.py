"""Environment variables of README's configuration table reach the settings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def settings_in_subprocess(**env: str) -> dict:
    code = ("import django, json; django.setup(); from django.conf import settings as s; "
            "print(json.dumps({k: getattr(s, k) for k in ('PMEM_RULE_PATTERNS', "
            "'PMEM_LLM_BASE_URL', 'PMEM_EMBED_BASE_URL', 'PMEM_IDENTITY_THRESHOLD')}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True,
                         text=True, env={**os.environ, "DJANGO_SETTINGS_MODULE": "pmem_site.settings",
                                         **env})
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_model_and_pattern_variables_are_read_from_the_environment(tmp_path):
    patterns = tmp_path / "patterns.json"
    patterns.write_text("[]")
    got = settings_in_subprocess(PMEM_RULE_PATTERNS=str(patterns),
                                 PMEM_LLM_BASE_URL="http://127.0.0.1:9/v1",
                                 PMEM_EMBED_BASE_URL="http://127.0.0.1:9/v1",
                                 PMEM_IDENTITY_THRESHOLD="0.8")
    assert got == {"PMEM_RULE_PATTERNS": str(patterns), "PMEM_LLM_BASE_URL": "http://127.0.0.1:9/v1",
                   "PMEM_EMBED_BASE_URL": "http://127.0.0.1:9/v1", "PMEM_IDENTITY_THRESHOLD": 0.8}


def _setup_in_subprocess(tmp_path, **env: str) -> subprocess.CompletedProcess[str]:
    code = "import django; django.setup(); print('configured')"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "DJANGO_SETTINGS_MODULE": "pmem_site.settings",
                               "PMEM_DATA_DIR": str(tmp_path / "data"), **env})


def test_importing_the_settings_starts_no_service(tmp_path):
    done = _setup_in_subprocess(tmp_path)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "data").exists()  # no PostgreSQL, no Redis, not even their folder


@pytest.mark.parametrize(("name", "raw"), [("PMEM_PREPARED_READS", "ture"),
                                           ("PMEM_COMMIT_GROUP", "sixteen"),
                                           ("PMEM_IDENTITY_THRESHOLD", "high")])
def test_a_malformed_variable_is_an_error_that_names_it(tmp_path, name, raw):
    done = _setup_in_subprocess(tmp_path, **{name: raw})
    assert done.returncode != 0
    assert "ImproperlyConfigured" in done.stderr and name in done.stderr and repr(raw) in done.stderr
