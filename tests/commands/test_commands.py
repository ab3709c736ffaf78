"""The management commands of CONTRACT.md and README."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from memory.models import ApiToken, Evidence, Membership, SourceTrust
from memory.selectors.cells import cell_detail
from memory.services import token_digest

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_pmem_namespace_create_prints_a_token_scoped_to_it():
    line = json.loads(run("pmem_namespace", "create", "agent-7"))
    assert line["namespace"] == "agent-7"
    token = ApiToken.objects.get(digest=token_digest(line["token"]))
    assert token.namespace.name == "agent-7" and token.scope == "review"
    again = json.loads(run("pmem_namespace", "create", "agent-7"))  # exists: a new token
    assert again["namespace"] == "agent-7" and again["token"] != line["token"]


def test_pmem_namespace_refuses_a_bad_name():
    with pytest.raises(CommandError, match="lower-case"):
        run("pmem_namespace", "create", "Not OK!")


def test_pmem_demo_fills_every_kind_of_history_once():
    token = run("pmem_demo", "--print-token").strip()
    stored = ApiToken.objects.get(digest=token_digest(token))
    assert stored.namespace.name == "demo" and stored.scope == "review"
    assert run("pmem_demo", "--print-token").strip() == token  # the same token every run
    assert Membership.objects.get(namespace__name="demo", user__username="demo").role == "reviewer"
    count = Evidence.objects.filter(namespace__name="demo").count()
    run("pmem_demo")
    assert Evidence.objects.filter(namespace__name="demo").count() == count  # idempotent
    from memory.models import Namespace

    ns = Namespace.objects.get(name="demo")
    status = {k: cell_detail(namespace=ns, key=k).status for k in (
        "alice_home_city", "mug_1_location", "team_meeting_day", "project_lead",
        "favorite_color", "temp_access_code", "laptop_1_location")}
    assert status["team_meeting_day"] == "contested" and status["temp_access_code"] == "empty"
    assert cell_detail(namespace=ns, key="mug_1_location").value == "countertop 1"
    assert cell_detail(namespace=ns, key="laptop_1_location").value == "desk 1"


def test_pmem_trust_sets_and_lists_levels(ns):
    out = json.loads(run("pmem_trust", ns.name, "registry", "10"))
    assert out["trust"] == {"registry": 10}
    assert SourceTrust.objects.get(namespace=ns, source="registry").level == 10
    run("pmem_trust", ns.name, "registry", "3")
    assert json.loads(run("pmem_trust", ns.name, "--list"))["trust"] == {"registry": 3}
