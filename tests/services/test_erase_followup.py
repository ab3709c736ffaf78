"""What an erase leaves for after the request, and how it deletes: redacted observations are
re-embedded, the dead tuples VACUUMed once (never in the request); without the privilege to
skip foreign-key triggers the erase still works; something outside the key pointing into it
stops the erase (SPEC §6; docs/decisions.md, "Privacy erase")."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory.models import Cell, EraseAudit, Evidence, Version
from memory.services import cell_erase, erase_followup, observations_ingest
from memory.services.erase import REEMBED_INLINE, DanglingReference


def _polled(ns, key: str, n: int) -> None:
    observations_ingest(namespace=ns, observations=[{"text": f"{key} = state {i}"}
                                                    for i in range(n)])


@pytest.mark.django_db(transaction=True)
def test_followup_reembeds_what_the_request_left_and_vacuums_once(make_namespace) -> None:
    ns = make_namespace("erase-followup")
    _polled(ns, "status", REEMBED_INLINE + 8)
    erased = cell_erase(namespace=ns, key="status", actor="user:t")
    assert erased.reembed_pending == 8
    assert Evidence.objects.filter(namespace=ns, embedding__isnull=True).count() == 8

    done = erase_followup()

    assert done["reembedded"] >= 8 and done["vacuumed"] >= 1
    assert not Evidence.objects.filter(namespace=ns, embedding__isnull=True).exists()
    assert EraseAudit.objects.get(namespace=ns).vacuumed_at is not None
    assert erase_followup() == {"reembedded": 0, "vacuumed": 0}


@pytest.mark.django_db
def test_without_the_privilege_to_skip_triggers_the_erase_lets_them_check(ns) -> None:
    _polled(ns, "status", 3)
    with connection.cursor() as cur:
        cur.execute("CREATE ROLE pmem_plain_test NOLOGIN")
        cur.execute("GRANT ALL ON ALL TABLES IN SCHEMA public TO pmem_plain_test")
        cur.execute("GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO pmem_plain_test")
        cur.execute("SET LOCAL ROLE pmem_plain_test")
    with CaptureQueriesContext(connection) as ctx:
        cell_erase(namespace=ns, key="status", actor="user:t")
    with connection.cursor() as cur:
        cur.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the deferred checks, as at commit
        cur.execute("RESET ROLE")
    assert not any("session_replication_role = origin" in q["sql"]
                   for q in ctx.captured_queries)  # the triggers were never off
    assert not Cell.objects.filter(namespace=ns, key="status").exists()


@pytest.mark.django_db
def test_a_row_outside_the_key_pointing_into_it_stops_the_erase(ns) -> None:
    _polled(ns, "status", 2)
    _polled(ns, "other", 1)
    theirs = Version.objects.get(cell__namespace=ns, cell__key="other")
    mine = Version.objects.filter(cell__namespace=ns, cell__key="status").order_by("id").first()
    Version.objects.filter(pk=theirs.pk).update(alternative_of=mine)  # what a bug could do
    with pytest.raises(DanglingReference):
        cell_erase(namespace=ns, key="status", actor="user:t")
    assert Version.objects.filter(cell__namespace=ns, cell__key="status").count() == 2
    assert not EraseAudit.objects.filter(namespace=ns).exists()
