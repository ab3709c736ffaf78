"""A namespace whose facts expire exports as format version 4 and imports back with each
version's expiry and the expired ones' status (SPEC §13, §11.2)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command

from memory.models import Namespace, Operation, Version
from memory.services import namespace_create, observation_ingest
from memory.services.expiry import expire_due

pytestmark = pytest.mark.django_db(transaction=True)


def test_expiries_and_expired_versions_round_trip(tmp_path: Path, capsys) -> None:
    ns = namespace_create(name="ending-source")
    observation_ingest(namespace=ns, facts=[{"key": "door_code", "value": "4711", "ttl": 60},
                                            {"key": "trip", "value": "Rome", "ttl": 3600}])
    door = Version.objects.get(value="4711")
    Version.objects.filter(pk=door.pk).update(expires_at=door.created_at + timedelta(milliseconds=1))
    expire_due(namespace_id=ns.pk)
    out = tmp_path / "ns.ndjson"
    call_command("pmem_export", "ending-source", "--out", str(out))
    assert json.loads(out.read_text().splitlines()[0])["version"] == 4
    call_command("pmem_import", str(out), "--as", "ending-copy")
    copy = Namespace.objects.get(name="ending-copy")
    mine = {(v.value, v.status, v.expires_at) for v in Version.objects.filter(namespace=ns)}
    theirs = {(v.value, v.status, v.expires_at) for v in Version.objects.filter(namespace=copy)}
    assert mine == theirs and ("4711", "expired", door.created_at + timedelta(milliseconds=1)) in mine
    assert Operation.objects.filter(namespace=copy, type="expire").count() == 1
