"""Every explorer page under hostile query parameters never answers 5xx (beside the API's
schemathesis run, tests/api/test_schema_fuzz.py).

For each URL pattern of the explorer that answers GET, the test first learns which query
parameters the page reads (by recording the lookups the view makes), then sends each of them
every value of a hostile table — times PostgreSQL cannot hold, zones that are no zone, numbers
past bigint, digits of other scripts, NUL bytes, very long text — and finally lets Hypothesis
combine several of them, with and without htmx. A page may refuse (400, 403, 404) — never fail.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.http.request import QueryDict
from django.test import Client
from django.urls import URLPattern, reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer.urls import explorer_patterns
from memory.models import ApiToken, Cell, Evidence, Operation, Version
from memory.services import token_create
from memory.services.webhooks import webhook_create

pytestmark = pytest.mark.django_db(transaction=True)

EXAMPLES_PER_PAGE = 30
A_TIME = "2026-01-01T00:00:00Z"

HOSTILE = (
    "", " ", "0", "-1", "1", "501", "99999999999999999999", "9223372036854775808", "²", "١٢",
    "+3", "1e309", "NaN", "\x00", "a\x00b", "%", "'", "<script>alert(1)</script>", "x" * 5000,
    # times past PostgreSQL's offsets, past the calendar once shifted, zone-less, malformed
    "2026-12-01T10:00:00+16:00", "2026-12-01T10:00:00 16:00", "2026-01-01T00:00+23:59",
    "9999-12-31T23:59:59-14:00", "9999-12-31T23:59:59.999999Z", "0001-01-01T00:00:00+14:00",
    "0001-01-01T00:10", "0001-01-01", "9999-12-31", "2026-11-30T10:00:00", "2026-02-30T00:00Z",
    A_TIME, "20261201T100000Z", "yesterday",
    # zones
    "Asia/Tokyo", "Pacific/Kiritimati", "Nope/Zone", "../../etc/passwd", "/etc/localtime",
    # words the pages know
    "v0", "v99999999999999", "id 99999999999999999999", "#1", "older", "newer", "actions",
    "restore", "support", "contested", "failed", "-value", "revoke", "//evil.example",
)
values = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=40),
                   st.integers(min_value=-2**70, max_value=2**70).map(str))


def _urls(ns: Any, admin: Any) -> list[str]:
    """One URL per explorer pattern, its path parameters naming things that exist."""
    cell = Cell.objects.filter(namespace=ns, head__isnull=False).order_by("key").first()
    assert cell is not None
    version = Version.objects.filter(cell=cell).order_by("id").first()
    evidence = Evidence.objects.filter(namespace=ns).order_by("id").first()
    operation = Operation.objects.filter(namespace=ns).order_by("-id").first()
    token = ApiToken.objects.filter(namespace=ns).first()
    # A public address written as an address: nothing is resolved, nothing is called.
    endpoint = webhook_create(namespace=ns, url="https://93.184.216.34/hook", actor="fuzz")
    assert version and evidence and operation and token
    kwargs = {"ns": ns.name, "key": cell.key, "version_id": version.pk,
              "evidence_id": evidence.pk, "operation_id": operation.pk, "token_id": token.pk,
              "user_id": admin.pk, "fmt": "csv", "endpoint_id": endpoint.pk}
    urls = []
    for pattern in explorer_patterns:
        assert isinstance(pattern, URLPattern)
        names = re.findall(r"<(?:\w+:)?(\w+)>", str(pattern.pattern))
        urls.append(reverse(f"explorer:{pattern.name}", kwargs={n: kwargs[n] for n in names}))
    return urls


def _parameters_read(client: Client, url: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The query parameters ``url``'s view looks up. A lookup of a name the query does not
    hold is the view asking for it; so, from an empty query, each round sends what was asked
    for (as a number, as a time, each alone and all together) until nothing new is asked."""
    asked: set[str] = set()

    def recording(method: Callable[..., Any]) -> Callable[..., Any]:
        def lookup(self: QueryDict, key: str, *args: Any, **kwargs: Any) -> Any:
            asked.add(key)
            return method(self, key, *args, **kwargs)
        return lookup

    with monkeypatch.context() as patch:
        for name in ("get", "getlist", "__getitem__", "__contains__"):
            patch.setattr(QueryDict, name, recording(getattr(QueryDict, name)))
        known: set[str] | None = None
        while known != asked:
            known = set(asked)
            queries = [{}, {p: "1" for p in known}, {p: A_TIME for p in known},
                       *({p: A_TIME} for p in known), *({p: "1"} for p in known)]
            for query in queries:
                for headers in ({}, {"HX-Request": "true"}):
                    client.get(url, query, headers=headers)
    return sorted(asked)


def test_every_explorer_page_takes_any_query_without_a_server_error(
        demo_ns: Any, make_user: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    admin = make_user("admin", demo_ns)
    token_create(namespace=demo_ns, client="fuzz", name="fuzz")
    client = Client(raise_request_exception=False)
    client.force_login(admin)
    pages = {url: _parameters_read(client, url, monkeypatch)
             for url in _urls(demo_ns, admin) if client.get(url).status_code != 405}
    assert len(pages) >= 20, pages  # the pages, the fragments and the exports
    cell_page = next(u for u in pages if u.endswith("/cells/alice_home_city/"))
    assert {"as_of", "at", "tz", "jump", "around", "before", "q"} <= set(pages[cell_page])
    failures: list[str] = []
    sent = 0

    def send(url: str, query: list[tuple[str, str]], headers: dict[str, str]) -> None:
        nonlocal sent
        response = client.get(url, query, headers=headers)
        sent += 1
        if response.status_code >= 500:
            failures.append(f"{url} {query!r} {headers}: {response.status_code}")

    for url, names in pages.items():
        for name in names:  # each parameter alone, every hostile value
            for value in HOSTILE:
                send(url, [(name, value)], {})
        if not names:
            continue

        @settings(max_examples=EXAMPLES_PER_PAGE, deadline=None, derandomize=True,
                  suppress_health_check=list(HealthCheck), database=None)
        @given(query=st.lists(st.tuples(st.sampled_from(names), values), max_size=4),
               htmx=st.booleans(), json=st.booleans())
        def combined(url: str, query: list[tuple[str, str]], htmx: bool, json: bool) -> None:
            send(url, query, {**({"HX-Request": "true"} if htmx else {}),
                              **({"Accept": "application/json"} if json else {})})

        combined(url)
    print(f"explorer fuzz: {sent} requests over {len(pages)} pages, "
          f"{len(failures)} server errors")
    assert not failures, failures[:20]
