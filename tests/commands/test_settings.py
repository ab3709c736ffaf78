"""Environment variables of README's configuration table reach the settings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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
