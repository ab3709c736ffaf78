"""Input that is refused (CONTRACT): times without a zone, more than 500 facts however they
arise, and source names that read as another (NFKC, case, invisible characters, look-alikes
from another script)."""

from __future__ import annotations

import json

import pytest

from memory.models import Cell, Evidence
from memory.services import token_bind, token_create, trust_set

pytestmark = pytest.mark.django_db


def base(ns) -> str:
    return f"/api/v1/namespaces/{ns.name}/"


def post(api, ns, body, wait=True):
    return api.post(base(ns) + "observations/" + ("?wait=1" if wait else ""), json.dumps(body),
                    content_type="application/json")


@pytest.mark.parametrize("raw", ["2026-12-01T10:00:00", "2026-12-01 10:00", "2026-12-01"])
def test_observed_at_without_a_zone_is_400(api, ns, raw):
    r = post(api, ns, {"text": "k = v", "observed_at": raw})
    assert r.status_code == 400 and r.json()["field"] == "observed_at", r.content
    assert "zone" in r.json()["error"]
    assert not Evidence.objects.filter(namespace=ns).exists()


def test_rule_extracted_facts_past_the_cap_fail_the_observation_whole(api, ns, commit_pending):
    text = "\n".join(f"k{i} = v{i}" for i in range(501))
    r = post(api, ns, {"text": text})
    assert r.status_code in (201, 202), r.content
    commit_pending()
    evidence = Evidence.objects.get(namespace=ns)
    assert evidence.state == "failed", evidence.state
    assert "at most 500 facts" in evidence.error and "501" in evidence.error
    assert not Cell.objects.filter(namespace=ns).exists()  # nothing of it committed
    seen = api.get(base(ns) + f"observations/{evidence.pk}/").json()
    assert seen["status"] == "failed" and "500" in seen["error"]
    # 500 are fine.
    ok = post(api, ns, {"text": "\n".join(f"k{i} = v{i}" for i in range(500))})
    assert ok.status_code == 201 and ok.json()["facts_found"] == 500


@pytest.fixture
def hr_token(ns):
    trust_set(namespace=ns, source="payroll", level=5, actor="user:admin")
    trust_set(namespace=ns, source="hr", level=1, actor="user:admin")
    token = token_create(namespace=ns, client="hr-bot", scope="write")
    token_bind(token=token, sources=["hr"], actor="user:admin")
    return token


@pytest.mark.parametrize("spelling", ["PAYROLL", "Payroll", "payroll\u200b", "pay\u00adroll",
                                      "\uff50\uff41\uff59\uff52\uff4f\uff4c\uff4c"])
def test_a_token_bound_to_hr_cannot_write_as_a_spelling_of_payroll(client_for, ns, hr_token,
                                                                   spelling):
    api = client_for(ns)
    api.credentials(HTTP_AUTHORIZATION=f"Token {hr_token.key}")
    r = post(api, ns, {"text": "salary = 1", "source": spelling})
    assert r.status_code == 403, r.content
    assert not Evidence.objects.filter(namespace=ns).exists()


def test_a_mixed_script_look_alike_is_refused(client_for, ns, hr_token):
    api = client_for(ns)
    api.credentials(HTTP_AUTHORIZATION=f"Token {hr_token.key}")
    r = post(api, ns, {"text": "salary = 1", "source": "p\u0430yroll"})  # Cyrillic а
    assert r.status_code == 400 and r.json()["field"] == "source", r.content
    assert not Evidence.objects.filter(namespace=ns).exists()
    # One script, whatever it is, is a name like any other.
    assert post(api, ns, {"text": "salary = 1", "source": "東京"}).status_code == 201


def test_a_reviewer_naming_a_spelling_of_a_trusted_source_is_recorded_under_it(
        client_for, ns, hr_token):
    reviewer = token_create(namespace=ns, client="rev", scope="review")
    api = client_for(ns)
    api.credentials(HTTP_AUTHORIZATION=f"Token {reviewer.key}")
    r = post(api, ns, {"text": "salary = 1", "source": "PAY\u00adROLL"})
    assert r.status_code == 201 and r.json()["source"] == "payroll", r.content
