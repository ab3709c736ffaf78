"""The backfill of migration 0011_operation_attribution, run on rows as the service wrote
them before it (the method in ``actor``: ``extractor``, ``annotator``, bare ``api``)."""

from __future__ import annotations

import importlib

import pytest
from django.db import connection

from memory.models import Operation
from memory.services import observation_record

pytestmark = pytest.mark.django_db

migration = importlib.import_module("memory.migrations.0011_operation_attribution")


def _old_row(ns, actor: str, *, evidence=None, type_: str = "accept", payload=None) -> Operation:
    return Operation.objects.create(namespace=ns, key="k", type=type_, actor=actor,
                                    evidence=evidence, payload=payload or {},
                                    method="explicit", source="")


def test_old_rows_name_who_asked_and_move_the_method_out_of_the_actor(ns):
    by_agent = observation_record(namespace=ns, text="k = v", source="agent:planner",
                                  actor="api:planner").evidence
    anonymous = observation_record(namespace=ns, text="k = w", source="import").evidence
    rows = {
        "rule": _old_row(ns, "extractor", evidence=by_agent),
        "model": _old_row(ns, "annotator", evidence=by_agent),
        "identity": _old_row(ns, "annotator", evidence=by_agent, payload={"alias_of": "kk"}),
        "system": _old_row(ns, "extractor", evidence=anonymous),
        "client": _old_row(ns, "api", evidence=by_agent, type_="revoke"),
        "person": _old_row(ns, "user:rev", type_="revoke"),
        "rollback": _old_row(ns, "extractor", evidence=by_agent, type_="reinstate"),
    }
    with connection.cursor() as cur:
        cur.execute(migration.BACKFILL)
    got = {name: Operation.objects.filter(pk=row.pk).values_list("actor", "method", "source")
           .get() for name, row in rows.items()}
    assert got == {
        "rule": ("api:planner", "rule", "agent:planner"),
        "model": ("api:planner", "model", "agent:planner"),
        "identity": ("api:planner", "identity", "agent:planner"),
        "system": ("system", "rule", "import"),
        "client": ("api:planner", "explicit", "agent:planner"),
        "person": ("user:rev", "explicit", ""),
        "rollback": ("api:planner", "reinstate", "agent:planner"),
    }
