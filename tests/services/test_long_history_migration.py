"""Migration 0010's backfill rebuilds what the commit keeps: ordinals, counters and status spans
from the operation log's effects."""

from __future__ import annotations

from importlib import import_module

import pytest
from django.db import connection, transaction

from memory.domain import OpType
from memory.domain.plan import OpInput
from memory.models import Cell, Version, VersionSpan
from memory.services import operation_apply
from memory.services.graph import apply_batch

pytestmark = pytest.mark.django_db

backfill = import_module("memory.migrations.0010_long_histories")


def _spans(ns) -> list[tuple[int, str, object, object]]:
    return list(VersionSpan.objects.filter(version__namespace=ns).order_by(
        "version_id", "since", "id").values_list("version_id", "status", "since", "until"))


def _counts(ns) -> list[tuple[int, int, int]]:
    return sorted((v.cell_id, v.id, v.ordinal) for v in Version.objects.filter(namespace=ns))


def test_the_backfill_rebuilds_the_spans_ordinals_and_counters_the_commit_wrote(ns):
    def op(key, kind, value=None, version=None):
        operation_apply(namespace=ns, key=key, op=kind, value=value, version_id=version,
                        actor="user:test")

    op("a", "accept", "1")
    op("a", "accept", "2")
    op("a", "contest", "3")
    op("a", "contest", "4")
    op("a", "revoke")  # the contest stays open against the reinstated head
    op("a", "resolve", "4")
    op("b", "accept", "x")
    op("b", "reject", "y")
    first = Version.objects.get(cell__namespace=ns, cell__key="a", value="1").id
    op("a", "revoke", version=first)
    op("b", "reject")
    with transaction.atomic():  # one batch: one commit time for three operations
        apply_batch(namespace=ns, items=[(OpInput(key="a", op=OpType.ACCEPT, value=v), "t")
                                         for v in ("5", "6", "7")])
    spans, counts = _spans(ns), _counts(ns)
    totals = dict(Cell.objects.filter(namespace=ns).values_list("id", "version_count"))

    with connection.cursor() as cur:
        cur.execute("DELETE FROM memory_versionspan s USING memory_version v"
                    " WHERE s.version_id = v.id AND v.namespace_id = %s", [ns.pk])
        cur.execute("UPDATE memory_cell SET version_count = 0 WHERE namespace_id = %s", [ns.pk])
        cur.execute("UPDATE memory_version SET ordinal = -id WHERE namespace_id = %s", [ns.pk])
        cur.execute(backfill._ORDINALS)
        cur.execute(backfill._SPANS)

    assert _counts(ns) == counts
    assert dict(Cell.objects.filter(namespace=ns).values_list("id", "version_count")) == totals
    assert _spans(ns) == spans


def test_a_version_whose_log_has_no_effects_gets_its_present_status(ns):
    operation_apply(namespace=ns, key="k", op="accept", value="v", actor="user:test")
    version = Version.objects.get(cell__namespace=ns)
    with connection.cursor() as cur:
        cur.execute("UPDATE memory_operation SET payload = '{}' WHERE namespace_id = %s",
                    [ns.pk])
        cur.execute("DELETE FROM memory_versionspan WHERE version_id = %s", [version.id])
        cur.execute(backfill._SPANS)
    assert _spans(ns) == [(version.id, "active", version.created_at, None)]
