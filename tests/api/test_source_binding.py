"""A source is only as good as the right to claim it (SPEC §8, CONTRACT "Tokens bound to
sources"): the black-box probe's forged ``"source": "hr"`` from a write token is now a 403
that stores nothing; bound tokens and review tokens name what they may."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from memory.models import AuditEntry, Evidence
from memory.selectors.cells import cell_detail
from memory.services import token_bind, token_create, trust_set
from tests.api.test_api import base, post
from tests.explorer.conftest import make_user  # noqa: F401,F811 - fixture

pytestmark = pytest.mark.django_db


@pytest.fixture
def trusted(ns):
    """hr is trusted (9), rumor a little (1); hr's value is the head."""
    trust_set(namespace=ns, source="hr", level=9, actor="cli")
    trust_set(namespace=ns, source="rumor", level=1, actor="cli")
    return ns


def holding(namespace, *, scope="write", sources=()):
    token = token_create(namespace=namespace, client="agent", scope=scope, sources=sources)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return api, token


def observe(api, ns, **body):
    return post(api, base(ns) + "observations/", {"facts": [{"key": "salary", "value": "555k"}],
                                                  **body})


def test_a_write_token_cannot_borrow_a_trusted_sources_weight(trusted, commit_pending):
    """The probe: an unbound write token sends source hr."""
    hr, _ = holding(trusted, sources=["hr"])
    assert observe(hr, trusted, source="hr", facts=[{"key": "salary", "value": "120k"}]
                   ).status_code == 202
    commit_pending()
    forger, _ = holding(trusted)
    refused = observe(forger, trusted, source="hr")
    assert refused.status_code == 403
    assert refused.json()["field"] == "source" and "hr" in refused.json()["error"]
    assert Evidence.objects.filter(namespace=trusted).count() == 1  # nothing stored
    assert observe(forger, trusted, source="rumor").status_code == 403  # any trusted one
    commit_pending()
    assert cell_detail(namespace=trusted, key="salary").value == "120k"


def test_a_write_token_names_sources_without_a_trust_level_freely(trusted, commit_pending):
    forger, _ = holding(trusted)
    for source in ("", "agent-notes"):
        assert observe(forger, trusted, source=source).status_code == 202, source
    assert observe(forger, trusted).status_code == 202  # no source at all
    # Names compare after NFKC and case folding: HR is hr, which has a trust level.
    assert observe(forger, trusted, source="HR").status_code == 403
    assert set(Evidence.objects.filter(namespace=trusted).values_list("source", flat=True)) \
        == {"", "agent-notes"}


def test_a_bound_token_names_its_sources_and_no_other_trusted_one(trusted):
    api, _ = holding(trusted, sources=["hr", "payroll"])
    assert observe(api, trusted, source="hr").status_code == 202
    assert observe(api, trusted, source="payroll").status_code == 202  # bound, no level yet
    assert observe(api, trusted, source="rumor").status_code == 403
    assert observe(api, trusted, source="elsewhere").status_code == 202


def test_a_token_bound_to_one_source_writes_as_it_when_it_names_none(trusted):
    api, _ = holding(trusted, sources=["hr"])
    answer = observe(api, trusted).json()
    assert Evidence.objects.get(pk=answer["id"]).source == "hr"
    named = observe(api, trusted, source="").json()  # an explicit "" is no source
    assert Evidence.objects.get(pk=named["id"]).source == ""
    two, _ = holding(trusted, sources=["hr", "payroll"])
    assert Evidence.objects.get(pk=observe(two, trusted).json()["id"]).source == ""


def test_a_review_token_names_any_source(trusted):
    api, _ = holding(trusted, scope="review")
    assert observe(api, trusted, source="hr").status_code == 202
    assert observe(api, trusted, source="rumor").status_code == 202


def test_a_reviewers_session_names_any_source_and_a_viewer_writes_nothing(
        trusted, make_user):  # noqa: F811
    session = APIClient()
    session.force_login(make_user("reviewer", trusted))
    assert observe(session, trusted, source="hr").status_code == 202
    viewer = APIClient()
    viewer.force_login(make_user("viewer", trusted))
    assert observe(viewer, trusted, source="").status_code == 403


def test_a_binding_change_applies_at_the_next_request_and_is_audited(trusted):
    api, token = holding(trusted)
    assert observe(api, trusted, source="hr").status_code == 403
    assert token_bind(token=token, sources=["hr"], actor="user:admin") is True
    assert observe(api, trusted, source="hr").status_code == 202
    assert token_bind(token=token, sources=["hr"], actor="user:admin") is False  # no change
    token_bind(token=token, sources=[], actor="user:admin")
    assert observe(api, trusted, source="hr").status_code == 403
    binds = AuditEntry.objects.filter(namespace=trusted, action="token_bind").order_by("id")
    assert [(e.actor, e.detail["sources"], e.detail["was"]) for e in binds] == [
        ("user:admin", ["hr"], []), ("user:admin", [], ["hr"])]


def test_trust_level_changes_are_audited_and_a_cleared_source_is_free_again(trusted):
    from memory.services import trust_clear

    api, _ = holding(trusted)
    assert trust_set(namespace=trusted, source="hr", level=9, actor="cli") is False
    trust_set(namespace=trusted, source="hr", level=7, actor="user:admin")
    assert trust_clear(namespace=trusted, source="hr", actor="user:admin") is True
    assert observe(api, trusted, source="hr").status_code == 202
    rows = AuditEntry.objects.filter(namespace=trusted, action__startswith="trust_").order_by("id")
    assert [(e.action, e.target, e.detail.get("level"), e.detail["was"]) for e in rows] == [
        ("trust_set", "source hr", 9, None), ("trust_set", "source rumor", 1, None),
        ("trust_set", "source hr", 7, 9), ("trust_clear", "source hr", None, 7)]


def test_whoami_lists_the_tokens_sources(trusted):
    api, _ = holding(trusted, sources=["hr", " payroll ", "hr", ""])
    assert api.get("/api/v1/whoami/").json()["sources"] == ["hr", "payroll"]


def test_a_binding_past_the_limits_is_refused(ns):
    with pytest.raises(ValueError, match="at most 32"):
        token_create(namespace=ns, scope="write", sources=[f"s{i}" for i in range(33)])
    with pytest.raises(ValueError, match="200"):
        token_create(namespace=ns, scope="write", sources=["x" * 201])
