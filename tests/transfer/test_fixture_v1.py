"""A version-1 file written by this code (``fixtures/v1.ndjson``) imports, and reads as it was
written, in every later version of P-Mem: the format's promise to the files people keep. Do
not regenerate the fixture; a later format version adds its own beside it.

The history it holds: ``city`` accepted from a trusted source (crm, level 2), contested by a
less trusted one, resolved for the challenger, retracted, the first value restored, the
restore undone; ``phone`` accepted from a late report, replaced, then a later-dated late
report placed into the history, the head retracted (rollback reinstates ring 77); ``pet``
stored with an idempotency key and erased; an alias ``town``; one observation still pending.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memory.models import EraseAudit, Evidence, Operation, SourceTrust, Version
from memory.services.transfer import namespace_import
from tests.support.transfer import api_for

pytestmark = pytest.mark.django_db

FIXTURE = Path(__file__).parent / "fixtures" / "v1.ndjson"
# Commit times in the fixture: while city was contested, and after Paris won the resolve.
CONTESTED_AT = "2026-12-01T22:24:20.220000+00:00"
RESOLVED_AT = "2026-12-01T22:24:20.250000+00:00"


@pytest.fixture
def copy():
    return namespace_import(FIXTURE, name="fixture-copy")


def test_the_v1_fixture_imports_with_its_counts(copy):
    assert copy.counts == {"namespace": 1, "trust": 1, "observation": 8, "cell": 2, "alias": 1,
                           "version": 6, "operation": 11, "span": 14, "support": 7,
                           "tombstone": 3, "erasure": 1}
    assert copy.namespace.next_seq == 9
    assert SourceTrust.objects.get(namespace=copy.namespace).level == 2


def test_the_v1_fixture_reads_as_it_was_written(copy):
    api = api_for(copy.namespace)
    base = "/api/v1/namespaces/fixture-copy"
    city = api.get(f"{base}/cells/city/").json()
    assert city["status"] == "empty" and city["aliases"] == ["town"]
    assert [(h["value"], h["status"]) for h in city["history"]] == [
        ("Rome 12", "revoked"), ("Paris", "revoked"), ("Rome 12", "contradicted")]
    assert api.get(f"{base}/cells/town/").json()["key"] == "city"
    phone = api.get(f"{base}/cells/phone/").json()
    assert (phone["value"], phone["status"]) == ("ring 77", "active")
    assert [(h["value"], h["status"], h["valid_from"][:4]) for h in phone["history"]] == [
        ("ring 12", "superseded", "2020"), ("ring 65", "revoked", "2026"),
        ("ring 77", "active", "2020")]
    assert api.get(f"{base}/cells/pet/").status_code == 404
    read = api.post(f"{base}/read/", {"query": "phone", "mode": "frontier"}, format="json")
    assert read.json()["items"][0]["key"] == "phone"


def test_the_v1_fixture_answers_as_of_its_past(copy):
    api = api_for(copy.namespace)
    base = "/api/v1/namespaces/fixture-copy"
    then = api.get(f"{base}/cells/city/", {"as_of": CONTESTED_AT}).json()
    assert (then["value"], then["status"]) == ("Rome 12", "contested")
    assert [a["value"] for a in then["alternatives"]] == ["Paris"]
    later = api.get(f"{base}/cells/city/", {"as_of": RESOLVED_AT}).json()
    assert (later["value"], later["status"]) == ("Paris", "active")


def test_the_v1_fixture_keeps_its_links_under_new_ids(copy):
    ns = copy.namespace
    restoring = Version.objects.get(namespace=ns, restores__isnull=False)
    assert restoring.restores.value == "Rome 12" and restoring.restores.status == "contradicted"
    restore = Operation.objects.get(namespace=ns, type="restore")
    undo = Operation.objects.get(namespace=ns, payload__has_key="undoes")
    assert undo.payload["undoes"] == restore.pk
    reinstate = Operation.objects.get(namespace=ns, type="reinstate")
    cause = Operation.objects.get(pk=reinstate.payload["cause"])
    assert cause.type == "revoke" and cause.key == "phone"
    assert reinstate.reason == f"rollback after operation {cause.pk}"
    assert cause.payload["head_after"] == reinstate.version_id
    log = api_for(ns).get("/api/v1/namespaces/fixture-copy/operations/").json()["results"]
    assert [o["op"] for o in log][:2] == ["reinstate", "revoke"] and len(log) == 11


def test_the_v1_fixture_keeps_its_observations_and_erasure(copy):
    rows = list(Evidence.objects.filter(namespace=copy.namespace).order_by("seq"))
    assert [e.seq for e in rows] == list(range(1, 9))
    assert rows[-1].state == "pending" and rows[-1].embedding is None
    assert rows[0].embedding is not None  # embedded again by this instance's embedder
    assert rows[5].idempotency_key is not None and "[erased]" in str(rows[5].facts)
    audit = EraseAudit.objects.get(namespace=copy.namespace)
    assert (audit.actor, audit.key, audit.versions_erased) == ("user:dpo", "", 2)
