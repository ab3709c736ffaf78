"""The explorer's privacy erase without a browser: who may see it, the typed confirmation,
and the preview and result pages (SPEC §6)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from memory.models import Cell, EraseAudit, Membership
from memory.services import observation_ingest, operation_apply
from memory.services.erase import key_digest

pytestmark = pytest.mark.django_db


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def secret_ns(make_namespace: Any) -> Any:
    ns = make_namespace("erase-ui")
    observation_ingest(namespace=ns, text="passcode: Zanzibar-4471\nbackup_code: Zanzibar-4471")
    observation_ingest(namespace=ns, text="colour: red")
    operation_apply(namespace=ns, key="colour", op="contest", value="blue", actor="user:x",
                    reason="the code Zanzibar-4471 is wrong", explicit=True)
    return ns


def test_a_viewer_sees_no_erase_and_cannot_reach_or_post_it(secret_ns: Any,
                                                             make_user: Any) -> None:
    client = client_for(make_user(Membership.Role.VIEWER, secret_ns))
    page = client.get(f"/ns/{secret_ns.name}/cells/passcode/").content.decode()
    assert "Privacy erase" not in page and "/erase/" not in page
    url = f"/ns/{secret_ns.name}/cells/passcode/erase/"
    assert client.get(url).status_code == 403
    assert client.post(url, {"confirm": "passcode"}).status_code == 403
    assert Cell.objects.filter(namespace=secret_ns, key="passcode").exists()


def test_the_preview_lists_scope_and_mentions_with_links(secret_ns: Any, make_user: Any) -> None:
    client = client_for(make_user(Membership.Role.REVIEWER, secret_ns))
    assert "/erase/" in client.get(f"/ns/{secret_ns.name}/cells/passcode/").content.decode()
    body = client.get(f"/ns/{secret_ns.name}/cells/passcode/erase/").content.decode()
    assert f'href="/ns/{secret_ns.name}/cells/backup_code/"' in body
    assert f"/ns/{secret_ns.name}/operations/?key=colour&amp;before=" in body
    assert "Type the key" in body and 'name="confirm"' in body
    assert Cell.objects.filter(namespace=secret_ns, key="passcode").exists()  # nothing yet


def test_a_wrong_confirmation_is_refused_and_erases_nothing(secret_ns: Any,
                                                            make_user: Any) -> None:
    client = client_for(make_user(Membership.Role.REVIEWER, secret_ns))
    response = client.post(f"/ns/{secret_ns.name}/cells/passcode/erase/",
                           {"confirm": "backup_code"})
    assert response.status_code == 422 and "Type the key exactly" in response.content.decode()
    assert Cell.objects.filter(namespace=secret_ns, key="passcode").exists()
    assert not EraseAudit.objects.filter(namespace=secret_ns).exists()


def test_a_reviewer_erases_and_sees_what_was_redacted_and_what_remains(
        secret_ns: Any, make_user: Any) -> None:
    user = make_user(Membership.Role.REVIEWER, secret_ns)
    response = client_for(user).post(f"/ns/{secret_ns.name}/cells/passcode/erase/",
                                      {"confirm": "passcode"})
    body = response.content.decode()
    assert response.status_code == 200
    assert "1 observation that supported or produced it was redacted" in body
    assert f'href="/ns/{secret_ns.name}/cells/backup_code/"' in body
    assert not Cell.objects.filter(namespace=secret_ns, key="passcode").exists()
    audit = EraseAudit.objects.get(namespace=secret_ns)
    assert audit.actor == f"user:{user.username}" and audit.key == key_digest("passcode")


def test_the_preview_says_how_many_values_it_could_not_look_up_and_why(
        make_namespace: Any, make_user: Any) -> None:
    ns = make_namespace("erase-why")
    operation_apply(namespace=ns, key="sep", op="accept", value="a-b", actor="user:x")
    operation_apply(namespace=ns, key="sep", op="accept", value=": ", actor="user:x")
    client = client_for(make_user(Membership.Role.REVIEWER, ns))
    body = client.get(f"/ns/{ns.name}/cells/sep/erase/").content.decode()
    assert "1 value could not be looked up: 1 without a letter or digit to look for." in body
