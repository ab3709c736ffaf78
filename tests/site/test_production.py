"""PMEM_HTTPS=1: the deploy check is clean, the TLS settings act on real requests, and
``make run`` refuses to start a deployment with the development secret key."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOST = "pmem.example.com"
DEPLOY_CHECKS = ("security.W004", "security.W008", "security.W012", "security.W016")


def _env(**extra: str) -> dict[str, str]:
    # The browser tests' conftest sets DJANGO_ALLOW_ASYNC_UNSAFE, which a deployment must not.
    env = {k: v for k, v in os.environ.items()
           if k not in ("PMEM_HTTPS", "PMEM_SECRET_KEY", "PMEM_ALLOWED_HOSTS",
                        "DJANGO_ALLOW_ASYNC_UNSAFE")}
    return {**env, "DJANGO_SETTINGS_MODULE": "pmem_site.settings", **extra}


def _production_env() -> dict[str, str]:
    return _env(PMEM_HTTPS="1", PMEM_SECRET_KEY=secrets.token_urlsafe(50),
                PMEM_ALLOWED_HOSTS=HOST)


def _check_deploy(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level",
                           "WARNING"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=180)


def test_check_deploy_reports_nothing_under_pmem_https_with_a_real_key_and_host():
    result = _check_deploy(_production_env())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)" in result.stdout


def test_without_pmem_https_check_deploy_names_the_tls_settings():
    result = _check_deploy(_env(PMEM_SECRET_KEY=secrets.token_urlsafe(50),
                                PMEM_ALLOWED_HOSTS=HOST))
    assert result.returncode != 0
    for check in DEPLOY_CHECKS:
        assert check in result.stderr + result.stdout


PROBE = """
import django, json
django.setup()
from django.test import Client
c = Client(HTTP_HOST=%(host)r)
plain = c.get("/accounts/login/")
tls = c.get("/accounts/login/", HTTP_X_FORWARDED_PROTO="https")
health = c.get("/healthz")
print(json.dumps({
    "plain": [plain.status_code, plain.get("Location", "")],
    "tls": tls.status_code,
    "hsts": tls.get("Strict-Transport-Security", ""),
    "csp": tls.get("Content-Security-Policy", ""),
    "csrf_secure": bool(tls.cookies["csrftoken"]["secure"]),
    "health": health.status_code,
}))
"""


def test_pmem_https_redirects_plain_http_sets_hsts_and_secure_cookies():
    out = subprocess.run([sys.executable, "-c", PROBE % {"host": HOST}], cwd=ROOT,
                         env=_production_env(), capture_output=True, text=True, timeout=180,
                         check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["plain"] == [301, f"https://{HOST}/accounts/login/"]
    assert got["tls"] == 200
    assert got["hsts"] == "max-age=31536000; includeSubDomains; preload"
    assert got["csrf_secure"] is True
    assert "upgrade-insecure-requests" in got["csp"]
    assert got["health"] != 301  # probes speak plain HTTP to the app


def test_make_run_refuses_pmem_https_with_the_development_secret_key(tmp_path):
    data = tmp_path / "data"
    result = subprocess.run([sys.executable, "-m", "pmem_site.run"], cwd=ROOT, timeout=60,
                            env=_env(PMEM_HTTPS="1", PMEM_DATA_DIR=str(data)),
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert "PMEM_SECRET_KEY" in result.stderr
    assert not data.exists()  # refused before starting anything


def test_the_bundled_model_gets_one_call_at_a_time_unless_told_otherwise(monkeypatch):
    """`PMEM_LLM=local make run`: the bundled server answers one request at a time, so the
    stack keeps one call in flight; an operator's own setting stands."""
    from pmem_site.run import use_local_model

    monkeypatch.delenv("PMEM_MODEL_CONCURRENCY", raising=False)
    monkeypatch.setenv("PMEM_LLM_BASE_URL", "")
    use_local_model("http://127.0.0.1:1/v1", "SmolLM2")
    assert (os.environ["PMEM_LLM_BASE_URL"], os.environ["PMEM_MODEL_CONCURRENCY"]) == (
        "http://127.0.0.1:1/v1", "1")
    monkeypatch.setenv("PMEM_MODEL_CONCURRENCY", "3")
    use_local_model("http://127.0.0.1:1/v1", "SmolLM2")
    assert os.environ["PMEM_MODEL_CONCURRENCY"] == "3"
