"""Application tokens (CONTRACT "One application credential, many users' memories"): one
token reaches every namespace whose name starts with its prefix — creating one on its first
write — and nothing else, on every endpoint the URL conf has."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from memory.domain.scopes import Scope
from memory.models import ApiToken, AuditEntry, Evidence, Namespace
from memory.services import (
    namespace_create,
    observation_record,
    operation_apply,
    token_create,
    token_revoke,
)
from tests.api.test_scopes import ENDPOINTS, WHOLE_NAMESPACE, _call, _client, _url

pytestmark = pytest.mark.django_db

PREFIX = "acme-"


def app_token(scope: Scope = Scope.REVIEW, prefix: str = PREFIX) -> str:
    return token_create(namespace_prefix=prefix, client="acme-app", scope=scope).key


def post(api: APIClient, url: str, body: dict[str, Any]) -> Any:
    return api.post(url, json.dumps(body), content_type="application/json")


def remember(api: APIClient, ns: str, key: str, value: str, **fact: Any) -> Any:
    return post(api, f"/api/v1/namespaces/{ns}/observations/",
                {"facts": [{"key": key, "value": value, **fact}]})


def test_whoami_names_the_prefix_and_no_namespace():
    body = _client(app_token(Scope.WRITE)).get("/api/v1/whoami/").json()
    assert (body["namespace"], body["namespace_prefix"], body["scope"]) == (None, PREFIX, "write")
    plain = token_create(namespace=namespace_create(name="plain-one"), scope=Scope.READ).key
    body = _client(plain).get("/api/v1/whoami/").json()
    assert (body["namespace"], body["namespace_prefix"]) == ("plain-one", None)


def test_the_first_write_creates_the_namespace_and_reads_before_it_see_it_empty():
    api = _client(app_token(Scope.WRITE))
    listed = api.get("/api/v1/namespaces/acme-alice/cells/")
    assert listed.status_code == 200 and listed.json()["results"] == []
    for mode in ("frontier", "frontier_cosine", "raw", "raw_ordered"):
        read = post(api, "/api/v1/namespaces/acme-alice/read/", {"query": "x", "mode": mode})
        assert read.status_code == 200 and read.json()["items"] == [], mode
    filtered = post(api, "/api/v1/namespaces/acme-alice/read/",
                    {"query": "x", "filter": {"user": "alice"}, "min_score": 0.1})
    assert filtered.status_code == 200 and filtered.json()["items"] == []
    missing = api.get("/api/v1/namespaces/acme-alice/cells/food/")  # as in an empty one
    assert missing.status_code == 404 and "no cell" in missing.json()["error"]
    log = api.get("/api/v1/namespaces/acme-alice/operations/")
    assert log.status_code == 200 and log.json()["results"] == []
    assert not Namespace.objects.filter(name="acme-alice").exists()  # reads create nothing
    refused = post(api, "/api/v1/namespaces/acme-alice/observations/", {"text": "   "})
    assert refused.status_code == 400 and refused.json()["field"] == "text"
    assert not Namespace.objects.filter(name="acme-alice").exists()  # nor refused writes
    assert remember(api, "acme-alice", "food", "sushi").status_code == 202
    alice = Namespace.objects.get(name="acme-alice")
    assert Evidence.objects.filter(namespace=alice).count() == 1
    assert api.get("/api/v1/namespaces/acme-alice/cells/").status_code == 200


def test_a_read_token_creates_nothing():
    api = _client(app_token(Scope.READ))
    assert remember(api, "acme-bob", "food", "pizza").status_code == 403
    assert not Namespace.objects.filter(name="acme-bob").exists()


def test_a_name_no_namespace_may_have_is_400_naming_it():
    api = _client(app_token(Scope.WRITE))
    answer = remember(api, "acme-" + "x" * 120, "food", "pizza")
    assert answer.status_code == 400 and answer.json()["field"] == "namespace"
    assert not Namespace.objects.filter(name__startswith="acme-x").exists()


def test_two_users_never_see_each_other(commit_pending):
    api = _client(app_token(Scope.REVIEW))
    assert remember(api, "acme-alice", "food", "sushi", metadata={"k": 1}).status_code == 202
    assert remember(api, "acme-bob", "food", "pizza").status_code == 202
    alice, bob = (Namespace.objects.get(name=n) for n in ("acme-alice", "acme-bob"))
    commit_pending(alice)
    commit_pending(bob)
    assert api.get("/api/v1/namespaces/acme-alice/cells/food/").json()["value"] == "sushi"
    assert api.get("/api/v1/namespaces/acme-bob/cells/food/").json()["value"] == "pizza"
    alices = Evidence.objects.get(namespace=alice).pk
    # Alice's observation through Bob's path: another namespace's id is no such observation.
    assert api.get(f"/api/v1/namespaces/acme-bob/observations/{alices}/").status_code == 404
    bob_log = api.get("/api/v1/namespaces/acme-bob/operations/").json()["results"]
    assert {o["value"] for o in bob_log} == {"pizza"}
    read = post(api, "/api/v1/namespaces/acme-bob/read/", {"query": "food"}).json()
    assert "sushi" not in read["context"]
    assert post(api, "/api/v1/namespaces/acme-bob/read/",
                {"query": "food", "filter": {"k": 1}}).json()["items"] == []
    export = api.get("/api/v1/namespaces/acme-bob/export/")
    assert b"sushi" not in b"".join(export.streaming_content)


def test_idempotency_keys_are_each_users_own(commit_pending):
    api = _client(app_token(Scope.WRITE))
    body = {"facts": [{"key": "food", "value": "sushi"}], "idempotency_key": "turn-1"}
    first = post(api, "/api/v1/namespaces/acme-alice/observations/", body)
    other = post(api, "/api/v1/namespaces/acme-bob/observations/",
                 {**body, "facts": [{"key": "food", "value": "pizza"}]})
    assert first.status_code == other.status_code == 202  # no 409: keys are per namespace
    assert first.json()["id"] != other.json()["id"]
    assert not other.json()["replayed"]


@pytest.fixture
def outside(db) -> dict[str, Any]:
    """A namespace the prefix does not reach (its name starts like it, without the '-'),
    with a cell, an observation and an operation in it."""
    victim = namespace_create(name="acmecorp")
    operation_apply(namespace=victim, key="city", op="accept", value="Paris", actor="user:t")
    evidence = observation_record(namespace=victim, text="city = Paris", actor="api:t").evidence
    return {"ns": victim.name, "key": "city", "pk": evidence.pk, "namespace": victim}


NAMESPACED = [e for e in ENDPOINTS if "<str:ns>" in e[0]]


@pytest.mark.parametrize("route,method,view", NAMESPACED,
                         ids=[f"{m} {r}" for r, m, _ in NAMESPACED])
def test_outside_its_prefix_every_endpoint_is_404_and_changes_nothing(route, method, view,
                                                                        outside):
    before = (Evidence.objects.filter(namespace=outside["namespace"]).count(),
              list(outside["namespace"].cells.values_list("head_id", flat=True)))
    for scope in Scope:
        answer = _call(_client(app_token(scope)), method, _url(route, outside))
        assert answer.status_code in (403, 404), (scope, answer.status_code)
        if answer.status_code == 403:  # the scope is refused before any namespace is looked at
            assert "needs scope" in answer.json()["error"]
    review = _call(_client(app_token(Scope.REVIEW)), method, _url(route, outside))
    assert review.status_code == 404 and review.json() == {"error": "no such namespace"}
    assert before == (Evidence.objects.filter(namespace=outside["namespace"]).count(),
                      list(outside["namespace"].cells.values_list("head_id", flat=True)))


@pytest.mark.parametrize("route,method,view", NAMESPACED,
                         ids=[f"{m} {r}" for r, m, _ in NAMESPACED])
def test_inside_its_prefix_every_endpoint_answers_as_for_the_namespaces_own_token(
        route, method, view, outside):
    inside = namespace_create(name="acme-carol")
    operation_apply(namespace=inside, key="city", op="accept", value="Paris", actor="user:t")
    evidence = observation_record(namespace=inside, text="city = Paris", actor="api:t").evidence
    url = _url(route, {"ns": inside.name, "key": "city", "pk": evidence.pk})
    own = _call(_client(token_create(namespace=inside, scope=Scope.REVIEW).key), method, url)
    if (route, method) in WHOLE_NAMESPACE:  # the first call deleted it: make it again
        namespace_create(name="acme-carol")
    elif method == "DELETE":  # the first erase took the key: do it again to compare
        operation_apply(namespace=inside, key="city", op="accept", value="Paris", actor="u:t")
    app = _call(_client(app_token(Scope.REVIEW)), method, url)
    assert app.status_code == own.status_code, (app.status_code, own.status_code)


def test_a_revoked_application_token_is_401_everywhere():
    made = token_create(namespace_prefix=PREFIX, client="gone", scope=Scope.REVIEW)
    token_revoke(token=made, actor="cli")
    answer = _client(made.key).get("/api/v1/namespaces/acme-alice/cells/")
    assert answer.status_code == 401 and answer.json()["error"] == "token revoked"


def test_a_token_has_a_namespace_or_a_prefix_never_both(db):
    ns = namespace_create(name="solo")
    with pytest.raises(ValueError):
        token_create(namespace=ns, namespace_prefix=PREFIX)
    with pytest.raises(ValueError):
        token_create()
    with pytest.raises(ValueError):
        token_create(namespace_prefix="Acme")  # not the start of any namespace name
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        ApiToken.objects.create(namespace=None, namespace_prefix="", digest="x" * 64)


def test_pmem_token_create_and_list_by_prefix(capsys):
    namespace_create(name="acme-dave")
    call_command("pmem_token", "create", "--prefix", PREFIX, "--name", "acme-app",
                 "--scope", "write")
    line = json.loads(capsys.readouterr().out)
    assert (line["namespace"], line["namespace_prefix"], line["scope"], line["namespaces"]) == (
        None, PREFIX, "write", 1)
    assert _client(line["token"]).get("/api/v1/whoami/").json()["namespace_prefix"] == PREFIX
    call_command("pmem_token", "list", "--prefix", PREFIX)
    rows = [json.loads(r) for r in capsys.readouterr().out.splitlines()]
    assert [(r["id"], r["namespace_prefix"], r["namespace"]) for r in rows] == [
        (line["id"], PREFIX, None)]
    assert "token" not in rows[0]  # never the secret
    call_command("pmem_token", "list", "acme-dave")
    assert capsys.readouterr().out == ""  # an application token is no namespace's own
    audit = AuditEntry.objects.get(action="token_create", detail__token=line["id"])
    assert audit.namespace is None and audit.detail["namespace_prefix"] == PREFIX
    call_command("pmem_token", "revoke", str(line["id"]))
    revoked = json.loads(capsys.readouterr().out)
    assert (revoked["namespace_prefix"], revoked["revoked"]) == (PREFIX, True)


def test_pmem_token_refuses_a_prefix_and_a_namespace_together(capsys):
    from django.core.management.base import CommandError

    namespace_create(name="acme-erin")
    with pytest.raises(CommandError, match="not both"):
        call_command("pmem_token", "create", "acme-erin", "--prefix", PREFIX)
    with pytest.raises(CommandError, match="--prefix"):
        call_command("pmem_token", "create", "--prefix", "ACME")
    call_command("pmem_token", "create", "--prefix", "acme")
    assert "acme-" in capsys.readouterr().err  # the note: a prefix without its separator


@pytest.mark.parametrize("name", ["acme-a.b", "acme-a@b.com", "acme-\u00e5lice", "acme-Bob",
                                  "acme-" + "x" * 100])
def test_a_name_outside_the_rule_is_refused_with_the_rule_never_a_bare_404(name):
    api = _client(app_token(Scope.WRITE))
    for answer in (remember(api, name, "food", "sushi"),
                   api.get(f"/api/v1/namespaces/{name}/cells/"),
                   post(api, f"/api/v1/namespaces/{name}/read/", {"query": "x"})):
        assert answer.status_code == 400, (name, answer.status_code)
        assert answer.json()["field"] == "namespace"
        assert "lower-case ASCII letters, digits, '-' and '_'" in answer.json()["error"]
    assert not Namespace.objects.filter(name=name).exists()
