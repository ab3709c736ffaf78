"""What an erase leaves in the database's files (SPEC §6, README "Privacy erase"): with
``PMEM_ERASE_REWRITE`` the follow-up rewrites the erase tables, and after it and a CHECKPOINT
no table file (heap, TOAST, indexes) of those tables holds an erased value or the key's name."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import connection

from memory.services import cell_erase, erase_followup, observations_ingest
from memory.services.erase import ERASE_TABLES

SECRET = b"Qx7VaultZeta"


def table_files() -> list[Path]:
    """Every file of the erase tables: their heaps, TOAST tables and indexes, all forks and
    segments, as the server has them now."""
    with connection.cursor() as cur:
        cur.execute("SHOW data_directory")
        root = Path(cur.fetchone()[0])
        cur.execute(
            "SELECT pg_relation_filepath(c.oid) FROM pg_class c"
            " WHERE c.oid = ANY(%(t)s::regclass[])"
            " OR c.oid IN (SELECT reltoastrelid FROM pg_class WHERE oid = ANY(%(t)s::regclass[]))"
            " OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = ANY(%(t)s::regclass[])"
            "   OR indrelid IN (SELECT reltoastrelid FROM pg_class"
            "                   WHERE oid = ANY(%(t)s::regclass[])))",
            {"t": list(ERASE_TABLES)})
        paths = [root / row[0] for row in cur.fetchall() if row[0]]
    return [f for p in paths for f in p.parent.glob(p.name + "*") if f.is_file()]


def holding(needle: bytes) -> list[str]:
    with connection.cursor() as cur:
        cur.execute("CHECKPOINT")
    return [f.name for f in table_files() if needle in f.read_bytes()]


@pytest.mark.django_db(transaction=True)
def test_after_the_rewrite_and_a_checkpoint_no_table_file_holds_the_erased_bytes(
        make_namespace, settings) -> None:
    settings.PMEM_ERASE_REWRITE = True
    ns = make_namespace("erase-disk")
    observations_ingest(namespace=ns, observations=[
        {"text": f"vault_code = {SECRET.decode()}{i}\ncolour = red{i}"} for i in range(300)])
    assert holding(SECRET), "the values are in the files before the erase"

    cell_erase(namespace=ns, key="vault_code", actor="user:t")
    done = erase_followup()

    assert done["vacuumed"] >= 1
    assert holding(SECRET) == []
    assert holding(b"vault_code") == []
    assert holding(b"red299"), "what the erase kept is still there"
