"""Deleting a namespace in the explorer (SPEC §13): its admins only, and only once its name
is typed to confirm; then it is gone and its name starts empty."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from memory.models import Namespace, NamespaceDeletion
from memory.services import observation_ingest

pytestmark = pytest.mark.django_db(transaction=True)


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_an_admin_deletes_a_namespace_after_typing_its_name(ns: Any, make_user: Any) -> None:
    observation_ingest(namespace=ns, facts=[{"key": "food", "value": "sushi"}])
    admin = client_for(make_user("admin", ns))
    page = admin.get(f"/ns/{ns.name}/access/").content.decode()
    assert f'action="/ns/{ns.name}/access/delete/"' in page and 'name="confirm"' in page
    refused = admin.post(f"/ns/{ns.name}/access/delete/", {"confirm": ns.name.upper()})
    assert refused.status_code == 400 and "Nothing was deleted" in refused.content.decode()
    assert Namespace.objects.filter(pk=ns.pk).exists()
    done = admin.post(f"/ns/{ns.name}/access/delete/", {"confirm": ns.name})
    assert done.status_code == 302 and done["Location"] == "/"
    assert not Namespace.objects.filter(name=ns.name).exists()
    assert admin.get(f"/ns/{ns.name}/").status_code == 404
    assert NamespaceDeletion.objects.get().actor.startswith("user:")


@pytest.mark.parametrize("role", ["viewer", "reviewer", None])
def test_nobody_else_deletes_a_namespace(role: str | None, ns: Any, make_user: Any) -> None:
    client = client_for(make_user(role, ns))
    answer = client.post(f"/ns/{ns.name}/access/delete/", {"confirm": ns.name})
    assert answer.status_code == (404 if role is None else 403)
    assert Namespace.objects.filter(pk=ns.pk).exists()
