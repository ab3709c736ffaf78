"""Namespaces that end (SPEC §13, CONTRACT "Namespace lifecycle and expiry"): an application
token lists the namespaces under its prefix, exports one and deletes one with everything in it;
nothing of a deleted namespace stays reachable or in the database, nothing of another changes,
and its name starts empty."""

from __future__ import annotations

import gzip
import json
import sys
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from rest_framework.test import APIClient

from memory.domain.scopes import Scope
from memory.models import (
    Cell,
    Evidence,
    Namespace,
    NamespaceDeletion,
    Operation,
    Version,
)
from memory.services import membership_set, namespace_create, token_create
from memory.services import namespace_delete as namespace_delete_service
from memory.services.namespace_delete import name_digest
from tests.support import pgdump

pytestmark = pytest.mark.django_db(transaction=True)

PREFIX = "acme-"


def client(key: str) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return api


def app(scope: Scope = Scope.REVIEW, prefix: str = PREFIX) -> APIClient:
    return client(token_create(namespace_prefix=prefix, client="acme-app", scope=scope).key)


def remember(api: APIClient, ns: str, *facts: dict[str, Any], text: str = "") -> Any:
    body: dict[str, Any] = {"facts": list(facts)}
    if text:
        body["text"] = text
    answer = api.post(f"/api/v1/namespaces/{ns}/observations/?wait=1", json.dumps(body),
                      content_type="application/json")
    assert answer.status_code == 201, answer.content
    return answer.json()


def test_an_application_token_lists_the_namespaces_under_its_prefix_only():
    api = app(Scope.WRITE)
    remember(api, "acme-bob", {"key": "food", "value": "pizza"})
    remember(api, "acme-alice", {"key": "food", "value": "sushi"}, {"key": "city", "value": "Oslo"})
    namespace_create(name="other-carol")
    namespace_create(name="acmeish")  # shares letters, not the prefix
    page = api.get("/api/v1/namespaces/?limit=1").json()
    assert [r["name"] for r in page["results"]] == ["acme-alice"]
    assert page["results"][0]["cells"] == 2 and page["results"][0]["last_write_at"]
    assert page["results"][0]["created_at"]
    rest = api.get(page["next"]).json()
    assert [r["name"] for r in rest["results"]] == ["acme-bob"] and rest["next"] is None
    own = client(token_create(namespace=Namespace.objects.get(name="other-carol"),
                              scope=Scope.READ).key)
    body = own.get("/api/v1/namespaces/").json()
    assert [(r["name"], r["cells"], r["last_write_at"]) for r in body["results"]] == [
        ("other-carol", 0, None)]


def test_an_application_token_of_scope_review_exports_a_users_namespace():
    api = app(Scope.REVIEW)
    remember(api, "acme-alice", {"key": "food", "value": "sushi"})
    answer = api.get("/api/v1/namespaces/acme-alice/export/?gzip=1")
    assert answer.status_code == 200
    lines = gzip.decompress(b"".join(answer.streaming_content)).decode().splitlines()
    assert json.loads(lines[0])["namespace"] == "acme-alice"
    assert any('"sushi"' in line for line in lines[1:])
    writer = app(Scope.WRITE)
    assert writer.get("/api/v1/namespaces/acme-alice/export/").status_code == 403
    assert app(Scope.REVIEW, "zeta-").get(
        "/api/v1/namespaces/acme-alice/export/").status_code == 404


def _ids(ns: Namespace) -> dict[str, set[str]]:
    """The primary keys of every row the namespace holds, by table (as pg_dump names them)."""
    cells = set(Cell.objects.filter(namespace=ns).values_list("pk", flat=True))
    versions = set(Version.objects.filter(namespace=ns).values_list("pk", flat=True))
    return {
        "memory_cell": {str(i) for i in cells},
        "memory_version": {str(i) for i in versions},
        "memory_operation": {str(i) for i in Operation.objects.filter(namespace=ns)
                             .values_list("pk", flat=True)},
        "memory_evidence": {str(i) for i in Evidence.objects.filter(namespace=ns)
                            .values_list("pk", flat=True)},
        "memory_namespace": {str(ns.pk)},
    }


def _belongs(table: str, fields: dict[str, str | None], ids: dict[str, set[str]]) -> bool:
    """Is this row (as dumped) part of the deleted namespace?"""
    if fields.get("namespace_id") == next(iter(ids["memory_namespace"])):
        return True
    for column, owner in (("cell_id", "memory_cell"), ("version_id", "memory_version"),
                          ("operation_id", "memory_operation")):
        if fields.get(column) in ids[owner]:
            return True
    return fields.get("id") in ids.get(table, set())


def test_deleting_a_namespace_leaves_nothing_of_it_and_changes_nothing_else():
    api = app(Scope.REVIEW)
    secret = "zqxv-lisbon-north-7"
    remember(api, "acme-alice", {"key": "home", "value": secret}, text=f"I live in {secret}")
    remember(api, "acme-alice", {"key": "home", "value": "Porto"}, {"key": "pet", "value": "cat"})
    api.post("/api/v1/namespaces/acme-alice/cells/pet/operations/",
             json.dumps({"op": "revoke", "reason": "wrong"}), content_type="application/json")
    remember(api, "acme-bob", {"key": "home", "value": "Lisbon"}, text="bob lives in Lisbon")
    alice = Namespace.objects.get(name="acme-alice")
    own = token_create(namespace=alice, scope=Scope.READ).key
    ids = _ids(alice)
    before = pgdump.rows(pgdump.dump())

    answer = api.delete("/api/v1/namespaces/acme-alice/?report=1")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["counts"]["cells"] == 2 and body["counts"]["observations"] == 2
    assert body["counts"]["tokens"] == 1 and body["name_digest"] == name_digest("acme-alice")

    # Nothing of it is reachable: the namespace answers 404, its own token no longer works,
    # and to the application token the name reads as one never written (empty, SPEC §11).
    assert api.delete("/api/v1/namespaces/acme-alice/").status_code == 404
    fresh = api.get("/api/v1/namespaces/acme-alice/cells/")
    assert fresh.status_code == 200 and fresh.json()["results"] == []
    assert api.get("/api/v1/namespaces/acme-alice/cells/home/").status_code == 404
    assert client(own).get("/api/v1/whoami/").status_code == 401
    assert "acme-alice" not in [r["name"] for r in api.get("/api/v1/namespaces/").json()["results"]]
    dumped = pgdump.dump()
    assert secret not in dumped and "acme-alice" not in dumped
    after = pgdump.rows(dumped)
    # Nothing of another namespace changed: every row that is gone was the deleted one's,
    # every row that is new is its audit.
    for table, rows in before.items():
        for pk, (columns, line) in rows.items():
            kept = after.get(table, {}).get(pk)
            if kept is None:
                assert _belongs(table, pgdump.fields(columns, line), ids), (table, line)
            else:
                assert kept[1] == line, (table, line, kept[1])
    for table, rows in after.items():
        new = set(rows) - set(before.get(table, {}))
        assert table == "memory_namespacedeletion" or not new, (table, new)
    audit = NamespaceDeletion.objects.get()
    assert audit.actor == "api:acme-app" and audit.finished_at is not None
    assert audit.name_digest == name_digest("acme-alice")

    # The name starts empty.
    assert api.get("/api/v1/namespaces/acme-alice/cells/").json()["results"] == []
    remember(api, "acme-alice", {"key": "food", "value": "tea"})
    cells = api.get("/api/v1/namespaces/acme-alice/cells/").json()["results"]
    assert [(c["key"], c["value"]) for c in cells] == [("food", "tea")]


def test_who_may_delete_a_namespace():
    remember(app(Scope.WRITE), "acme-alice", {"key": "food", "value": "sushi"})
    assert app(Scope.WRITE).delete("/api/v1/namespaces/acme-alice/").status_code == 403
    assert app(Scope.REVIEW, "zeta-").delete("/api/v1/namespaces/acme-alice/").status_code == 404
    assert Namespace.objects.filter(name="acme-alice").exists()
    assert app(Scope.REVIEW).delete("/api/v1/namespaces/acme-alice/").status_code == 204
    assert not Namespace.objects.filter(name="acme-alice").exists()


def test_a_deletion_runs_in_batches_and_the_command_line_deletes_too(monkeypatch, capsys):
    ns = namespace_create(name="big-one")
    api = client(token_create(namespace=ns).key)
    for i in range(6):
        remember(api, "big-one", *({"key": f"k{j}", "value": f"v{i}"} for j in range(5)))
    monkeypatch.setattr(namespace_delete_service_module(), "BATCH_ROWS", 4)
    call_command("pmem_namespace", "delete", "big-one")
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["counts"]["versions"] == 30 and line["counts"]["observations"] == 6
    assert not Namespace.objects.filter(name="big-one").exists()
    assert not Version.objects.exists() and not Evidence.objects.exists()


def namespace_delete_service_module() -> Any:
    # The package re-exports the function under the module's name: take the module itself.
    module = sys.modules["memory.services.namespace_delete"]
    assert module.namespace_delete is namespace_delete_service
    return module


def test_of_the_people_only_a_namespaces_admins_delete_it():
    ns = namespace_create(name="team-space")
    people = {}
    for role in ("viewer", "reviewer", "admin", None):
        user = get_user_model().objects.create_user(f"person-{role}")
        if role:
            membership_set(namespace=ns, user=user, role=role)
        api = APIClient()
        api.force_authenticate(user)
        people[role] = api
    assert people[None].delete("/api/v1/namespaces/team-space/").status_code == 404
    assert people["viewer"].delete("/api/v1/namespaces/team-space/").status_code == 403
    assert people["reviewer"].delete("/api/v1/namespaces/team-space/").status_code == 403
    assert people["admin"].delete("/api/v1/namespaces/team-space/").status_code == 204
    assert not Namespace.objects.filter(name="team-space").exists()
