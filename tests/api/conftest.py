from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from memory.services import namespace_create, token_create


@pytest.fixture
def client_for():
    """An API client holding a token scoped to one namespace."""

    def make(namespace, client: str = "tester") -> APIClient:
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Token {token_create(namespace=namespace, client=client).key}")
        return api

    return make


@pytest.fixture
def api(ns, client_for):
    return client_for(ns)


@pytest.fixture
def other_ns(db):
    return namespace_create(name="other-space")


@pytest.fixture
def commit_pending(ns):
    """Commit what is pending in-process, through the worker's own service code (for tests
    that check API shapes rather than the Celery path, which tests/tasks covers)."""
    from memory.models import Evidence
    from memory.services import namespace_drain, observation_extract

    def run(namespace=None) -> None:
        namespace = namespace or ns
        for evidence_id in Evidence.objects.filter(namespace=namespace, state="pending").order_by(
                "seq").values_list("id", flat=True):
            observation_extract(evidence_id=evidence_id)
        namespace_drain(namespace_id=namespace.pk)

    return run
