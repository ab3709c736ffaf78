"""What an erase leaves in the database's files (SPEC §6, README "Privacy erase"): with
``PMEM_ERASE_REWRITE`` the follow-up rewrites the erase tables, and after it and a CHECKPOINT
no table file (heap, TOAST, indexes) of those tables holds an erased value or the key's name."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from memory.services import cell_erase, erase_followup, observations_ingest
from memory.services.changes import erase_keys_forget, erase_retention
from memory.services.erase import ERASE_TABLES

SECRET = b"Qx7VaultZeta"


def table_files(tables: tuple[str, ...] = ERASE_TABLES) -> list[Path]:
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
            {"t": list(tables)})
        paths = [root / row[0] for row in cur.fetchall() if row[0]]
    return [f for p in paths for f in p.parent.glob(p.name + "*") if f.is_file()]


def holding(needle: bytes, tables: tuple[str, ...] = ERASE_TABLES) -> list[str]:
    with connection.cursor() as cur:
        cur.execute("CHECKPOINT")
    return [f.name for f in table_files(tables) if needle in f.read_bytes()]


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
    # The key's name stays in the change feed's one erase event for its retention (SPEC §12),
    # then is blanked and rewritten out of the files.
    feed = ("memory_changeevent",)
    assert holding(b"vault_code", tuple(t for t in ERASE_TABLES if t not in feed)) == []
    assert erase_keys_forget(timezone.now() + erase_retention() + timedelta(seconds=1)) == 1
    assert holding(b"vault_code") == []
    assert holding(b"red299"), "what the erase kept is still there"
