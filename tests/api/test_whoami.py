"""``GET /api/v1/whoami/`` and the channel a request declares (``X-Pmem-Channel``): what the
agents' client and MCP server build on."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from memory.models import Operation

pytestmark = pytest.mark.django_db


def test_whoami_answers_the_tokens_namespace_scope_and_client(ns, client_for):
    answer = client_for(ns, client="planner").get("/api/v1/whoami/")
    assert answer.status_code == 200
    body = answer.json()  # CONTRACT's three fields, and the token's name, prefix and expiry
    assert {k: body[k] for k in ("namespace", "scope", "client")} == {
        "namespace": ns.name, "scope": "review", "client": "planner"}


def test_whoami_without_a_token_is_refused(ns):
    assert APIClient().get("/api/v1/whoami/").status_code == 401
    bad = APIClient()
    bad.credentials(HTTP_AUTHORIZATION="Token nope")
    assert bad.get("/api/v1/whoami/").status_code == 401
    browser = APIClient()
    browser.force_login(User.objects.create_user("reviewer", password="x"))
    answer = browser.get("/api/v1/whoami/")
    assert answer.status_code == 400 and answer.json()["field"] == "Authorization"


def test_the_declared_channel_signs_the_actor(ns, client_for):
    api = client_for(ns, client="robot")
    url = f"/api/v1/namespaces/{ns.name}/cells/lamp/operations/"
    api.post(url, {"op": "accept", "value": "on"}, format="json", HTTP_X_PMEM_CHANNEL="mcp")
    api.post(url, {"op": "accept", "value": "off"}, format="json")
    assert list(Operation.objects.filter(namespace=ns).order_by("id")
                .values_list("actor", flat=True)) == ["mcp:robot", "api:robot"]


def test_an_unknown_channel_is_a_bad_request_and_writes_nothing(ns, client_for):
    api = client_for(ns)
    answer = api.post(f"/api/v1/namespaces/{ns.name}/observations/",
                      json.dumps({"facts": [{"key": "a", "value": "1"}]}),
                      content_type="application/json", HTTP_X_PMEM_CHANNEL="user")
    assert answer.status_code == 400 and answer.json()["field"] == "X-Pmem-Channel"
    assert not ns.evidence.exists()


def test_an_explicit_op_in_an_observation_keeps_its_reason(ns, client_for, commit_pending):
    api = client_for(ns, client="robot")
    url = f"/api/v1/namespaces/{ns.name}/observations/"
    for body in ({"facts": [{"key": "mug", "value": "table"}]},
                 {"facts": [{"key": "mug", "value": "shelf"}]},
                 {"facts": [{"key": "mug", "op": "revoke", "reason": "misread"}]}):
        assert api.post(url, json.dumps(body), content_type="application/json",
                        HTTP_X_PMEM_CHANNEL="mcp").status_code == 202
    commit_pending()
    revoke = Operation.objects.get(namespace=ns, type="revoke")
    assert (revoke.actor, revoke.reason) == ("mcp:robot", "misread")
