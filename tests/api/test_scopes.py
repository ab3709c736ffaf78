"""Scopes on the HTTP API: every endpoint declares one, a walk of the URL conf checks the whole
endpoint x scope matrix, the schema states each; whoami; bad Authorization headers; rate limits.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone
from rest_framework.test import APIClient

from memory.api.base import ScopedView
from memory.domain.scopes import Scope, scope_allows
from memory.services import (
    membership_set,
    namespace_create,
    observation_record,
    operation_apply,
    token_create,
    token_revoke,
)

pytestmark = pytest.mark.django_db

API_PREFIX = "api/v1/"
HANDLERS = ("get", "post", "put", "patch", "delete")
PARAM = re.compile(r"<(?:\w+:)?(\w+)>")


def _walk(patterns: list[Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _walk(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            yield prefix + str(pattern.pattern), pattern.callback


def api_endpoints() -> list[tuple[str, str, Any]]:
    """(route, METHOD, view class) for every handler of every API route in the URL conf."""
    found = []
    for route, callback in _walk(get_resolver().url_patterns):
        if not route.startswith(API_PREFIX):
            continue
        view = getattr(callback, "view_class", None) or getattr(callback, "cls", None)
        for method in HANDLERS:
            if view is not None and hasattr(view, method):
                found.append((route, method.upper(), view))
    return found


ENDPOINTS = api_endpoints()


def test_the_walk_finds_every_api_endpoint():
    routes = {(route, method) for route, method, _ in ENDPOINTS}
    assert ("api/v1/whoami/", "GET") in routes
    assert ("api/v1/namespaces/<str:ns>/cells/<str:key>/", "DELETE") in routes
    assert ("api/v1/namespaces/<str:ns>/cells/<str:key>/operations/", "POST") in routes
    assert len(routes) >= 12


@pytest.mark.parametrize("route,method,view", ENDPOINTS,
                         ids=[f"{m} {r}" for r, m, _ in ENDPOINTS])
def test_every_api_endpoint_declares_the_scope_of_each_method(route, method, view):
    assert issubclass(view, ScopedView), f"{view.__name__} must derive from ScopedView"
    declared = view.scopes.get(method)
    assert declared is not None, f"{method} {route} declares no scope ({view.__name__}.scopes)"
    assert isinstance(declared.scope, Scope)


# --- the matrix ------------------------------------------------------------------------------

#: What CONTRACT requires of the endpoints it names (the walk covers every one, named or not).
CONTRACT_SCOPES = {
    ("api/v1/whoami/", "GET"): "read",
    ("api/v1/namespaces/<str:ns>/observations/", "POST"): "write",
    ("api/v1/namespaces/<str:ns>/observations/<int:pk>/", "GET"): "read",
    ("api/v1/namespaces/<str:ns>/cells/", "GET"): "read",
    ("api/v1/namespaces/<str:ns>/cells/<str:key>/", "GET"): "read",
    ("api/v1/namespaces/<str:ns>/cells/<str:key>/", "DELETE"): "review",
    ("api/v1/namespaces/<str:ns>/cells/<str:key>/graph/", "GET"): "read",
    ("api/v1/namespaces/<str:ns>/cells/<str:key>/operations/", "POST"): "review",
    ("api/v1/namespaces/<str:ns>/operations/", "GET"): "read",
    ("api/v1/namespaces/<str:ns>/read/", "POST"): "read",
    ("api/v1/namespaces/", "GET"): "read",
    ("api/v1/namespaces/<str:ns>/", "DELETE"): "review",
}
#: Endpoints after whose success the namespace is gone: the matrix calls them allowed last.
WHOLE_NAMESPACE = {("api/v1/namespaces/<str:ns>/", "DELETE")}


def test_contract_endpoints_need_the_scopes_contract_names():
    declared = {(r, m): v.scopes[m].scope.value for r, m, v in ENDPOINTS if m in v.scopes}
    assert {k: declared.get(k) for k in CONTRACT_SCOPES} == CONTRACT_SCOPES


def _url(route: str, values: dict[str, Any]) -> str:
    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        assert name in values, f"the scope matrix needs a value for <{name}> in {route}"
        return str(values[name])

    return "/" + PARAM.sub(fill, route)


def _call(api: APIClient, method: str, url: str) -> Any:
    return api.generic(method, url, json.dumps({}), content_type="application/json")


def _client(raw: str) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {raw}")
    return api


@pytest.fixture
def world(ns):
    operation_apply(namespace=ns, key="city", op="accept", value="Paris", actor="user:t")
    evidence = observation_record(namespace=ns, text="city = Paris", actor="api:t").evidence
    return {"ns": ns.name, "key": "city", "pk": evidence.pk}


@pytest.mark.parametrize("route,method,view", ENDPOINTS,
                         ids=[f"{m} {r}" for r, m, _ in ENDPOINTS])
def test_scope_matrix(route, method, view, ns, world):
    needed = view.scopes[method].scope
    url = _url(route, world)
    last = (route, method) in WHOLE_NAMESPACE
    for scope in sorted(Scope, key=lambda s: last and scope_allows(s, needed)):
        if last and scope_allows(scope, needed):
            _token_refusals(ns, method, url)  # while the namespace is still there
        response = _call(_client(token_create(namespace=ns, client=scope.value,
                                              scope=scope).key), method, url)
        if scope_allows(scope, needed):
            assert response.status_code not in (401, 403) and response.status_code < 500, (
                scope, response.status_code, response.content)
            if last:
                return
        else:
            assert response.status_code == 403, (scope, response.status_code)
            assert f"needs scope {needed.value}" in response.json()["error"]
    _token_refusals(ns, method, url)


def _token_refusals(ns, method: str, url: str) -> None:
    revoked = token_create(namespace=ns, client="gone", scope=Scope.REVIEW)
    token_revoke(token=revoked, actor="user:t")
    response = _call(_client(revoked.key), method, url)
    assert response.status_code == 401 and response.json()["error"] == "token revoked"
    expired = token_create(namespace=ns, client="old", scope=Scope.REVIEW,
                           expires_at=timezone.now() - timedelta(seconds=1))
    response = _call(_client(expired.key), method, url)
    assert response.status_code == 401 and response.json()["error"] == "token expired"


@pytest.mark.parametrize("route,method,view",
                         [e for e in ENDPOINTS if "<str:ns>" in e[0]],
                         ids=[f"{m} {r}" for r, m, _ in ENDPOINTS if "<str:ns>" in r])
def test_session_roles_map_to_scopes(route, method, view, ns, world):
    """A person's role counts as a scope: viewer read, reviewer and admin review; a
    non-member gets 404 whatever the method needs."""
    if (route, method) in WHOLE_NAMESPACE:  # admins only: test_namespace_lifecycle.py
        pytest.skip("deleting a namespace is an admin's: checked with each role elsewhere")
    needed = view.scopes[method].scope
    url = _url(route, world)
    for role, held in (("viewer", Scope.READ), ("reviewer", Scope.REVIEW),
                       ("admin", Scope.REVIEW), (None, None)):
        user = get_user_model().objects.create_user(f"{role}-{method}-{len(url)}-{held}")
        if role:
            membership_set(namespace=ns, user=user, role=role)
        api = APIClient()
        api.force_authenticate(user)
        status = _call(api, method, url).status_code
        if held is None:
            assert status == 404, (role, status)
        elif scope_allows(held, needed):
            assert status not in (401, 403, 404) or (status == 404 and method == "DELETE"), \
                (role, status)
        else:
            assert status == 403, (role, status)


def test_a_token_of_another_namespace_reads_as_no_such_namespace(ns, world):
    stranger = token_create(namespace=namespace_create(name="elsewhere"), scope=Scope.REVIEW)
    api = _client(stranger.key)
    existing = api.get(f"/api/v1/namespaces/{ns.name}/cells/")
    missing = api.get("/api/v1/namespaces/no-such-space/cells/")
    assert existing.status_code == missing.status_code == 404
    assert existing.json() == missing.json()


def test_the_schema_states_the_scope_of_every_operation(ns):
    api = _client(token_create(namespace=ns, scope=Scope.READ).key)
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    stated = {(path, method.upper()): op.get("x-pmem-scope")
              for path, ops in schema["paths"].items() for method, op in ops.items()}
    for route, method, view in ENDPOINTS:
        # drf-spectacular names a <pk> parameter {id}.
        path = "/" + PARAM.sub(lambda m: "{" + {"pk": "id"}.get(m.group(1), m.group(1)) + "}",
                               route)
        assert stated[(path, method)] == view.scopes[method].scope.value, (path, method)
    erase = schema["paths"]["/api/v1/namespaces/{ns}/cells/{key}/"]["delete"]
    assert "Token scope: `review`" in erase["description"]


# --- whoami ----------------------------------------------------------------------------------


@pytest.mark.parametrize("scope", list(Scope))
def test_whoami_tells_a_token_its_namespace_scope_and_client(ns, scope):
    token = token_create(namespace=ns, client="planner", name="planner", scope=scope)
    body = _client(token.key).get("/api/v1/whoami/").json()
    assert (body["namespace"], body["scope"], body["client"]) == (ns.name, scope.value, "planner")
    assert body["prefix"] == token.key[:len(body["prefix"])]
    assert token.key not in json.dumps(body)


# --- bad Authorization headers ---------------------------------------------------------------


@pytest.mark.parametrize("header", [
    "Token", "Token ", "Token a b", "Basic dXNlcjpwdw==", "Digest x", "Token\x00abc",
    "Token abc\x00def", "Token " + "x" * 10_000, "Token \u00e9t\u00e9", "Token \u6f22\u5b57",
    "Bearer", "Token pmem_" + "A" * 43, "token", "   ",
])
def test_malformed_or_unknown_authorization_gets_401_json(ns, header):
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=header)
    for method, path in (("GET", "cells/"), ("POST", "observations/"), ("DELETE", "cells/k/")):
        response = _call(api, method, f"/api/v1/namespaces/{ns.name}/{path}")
        assert response.status_code == 401, (header[:30], method, response.status_code)
        assert response["Content-Type"].startswith("application/json")
        assert response.json()["error"]


def test_a_nul_byte_inside_a_valid_token_is_refused(ns):
    token = token_create(namespace=ns)
    for raw in (token.key + "\x00", token.key[:10] + "\x00" + token.key[10:]):
        assert _client(raw).get(f"/api/v1/namespaces/{ns.name}/cells/").status_code == 401


def test_bearer_is_accepted_like_token(ns):
    token = token_create(namespace=ns, scope=Scope.READ)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token.key}")
    assert api.get(f"/api/v1/namespaces/{ns.name}/cells/").status_code == 200


def test_a_revoked_token_replayed_gets_401_even_on_another_namespace(ns):
    token = token_create(namespace=ns)
    token_revoke(token=token, actor="user:t")
    other = namespace_create(name="replay-target")
    for name in (ns.name, other.name, "no-such-space"):
        response = _client(token.key).get(f"/api/v1/namespaces/{name}/cells/")
        assert response.status_code == 401 and response.json() == {"error": "token revoked"}


# --- rate limits -----------------------------------------------------------------------------


def test_rate_limit_is_off_unless_configured(ns, settings):
    settings.PMEM_API_RATE = None
    api = _client(token_create(namespace=ns).key)
    assert all(api.get(f"/api/v1/namespaces/{ns.name}/cells/").status_code == 200
               for _ in range(30))


def test_over_the_rate_a_token_gets_429_with_retry_after(ns, settings):
    settings.PMEM_API_RATE = "3/min"
    first, second = _client(token_create(namespace=ns).key), _client(token_create(namespace=ns).key)
    url = f"/api/v1/namespaces/{ns.name}/cells/"
    assert [first.get(url).status_code for _ in range(3)] == [200, 200, 200]
    limited = first.get(url)
    assert limited.status_code == 429
    assert 0 < int(limited["Retry-After"]) <= 60
    assert "throttled" in limited.json()["error"]
    assert second.get(url).status_code == 200  # per token, not per server


def test_an_unreachable_cache_lets_requests_through_rather_than_fail(ns, settings, tmp_path):
    settings.PMEM_API_RATE = "1/min"
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                                   "LOCATION": f"unix://{tmp_path}/no-redis.sock"}}
    api = _client(token_create(namespace=ns).key)
    assert [api.get(f"/api/v1/namespaces/{ns.name}/cells/").status_code
            for _ in range(3)] == [200, 200, 200]


def test_mcp_tools_need_the_scope_of_the_endpoint_they_stand_for():
    from memory.domain.scopes import MCP_TOOL_SCOPES

    declared = {(r, m): v.scopes[m].scope for r, m, v in ENDPOINTS}
    ns_route = "api/v1/namespaces/<str:ns>/"
    stands_for = {
        "remember": (ns_route + "observations/", "POST"),
        "retract": (ns_route + "observations/", "POST"),  # an explicit-op fact
        "contest": (ns_route + "observations/", "POST"),
        "resolve": (ns_route + "observations/", "POST"),
        "recall": (ns_route + "read/", "POST"),
        "get_fact": (ns_route + "cells/<str:key>/", "GET"),
        "fact_history": (ns_route + "cells/<str:key>/", "GET"),
        "observation_status": (ns_route + "observations/<int:pk>/", "GET"),
    }
    assert set(MCP_TOOL_SCOPES) == set(stands_for)
    assert {tool: MCP_TOOL_SCOPES[tool] for tool in stands_for} == {
        tool: declared[endpoint] for tool, endpoint in stands_for.items()}
