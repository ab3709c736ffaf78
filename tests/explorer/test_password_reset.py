"""Password reset is off unless email is configured — its URLs 404, nothing tries SMTP — and
when it is on, requests for a link are throttled like logins."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.core import mail
from django.test import Client

pytestmark = pytest.mark.django_db

RESET_URLS = ["/accounts/password_reset/", "/accounts/password_reset/done/",
              "/accounts/reset/MQ/set-password/", "/accounts/reset/done/"]


@pytest.fixture
def email_on(settings: Any) -> Any:
    settings.PMEM_PASSWORD_RESET = True
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.AXES_FAILURE_LIMIT = 3
    return settings


@pytest.mark.parametrize("url", RESET_URLS)
def test_without_email_the_reset_urls_are_404(url: str, settings: Any) -> None:
    """The probe: an undocumented reset form tried SMTP on localhost:25 for anyone."""
    settings.PMEM_PASSWORD_RESET = False
    assert Client().get(url).status_code == 404
    assert Client().post(url, {"email": "a@example.com"}).status_code == 404


def test_the_login_and_password_change_stay(settings: Any, make_user: Any) -> None:
    settings.PMEM_PASSWORD_RESET = False
    assert Client().get("/accounts/login/").status_code == 200
    client = Client()
    client.force_login(make_user(None))
    assert client.get("/accounts/password_change/").status_code == 200


def test_with_email_a_reset_sends_a_link(email_on: Any, make_user: Any) -> None:
    user = make_user(None)
    user.email = f"someone-{uuid.uuid4().hex}@example.com"
    user.save()
    client = Client(REMOTE_ADDR=f"fd00::{uuid.uuid4().hex[:4]}")  # counts live in Redis
    response = client.post("/accounts/password_reset/", {"email": user.email})
    assert response.status_code == 302 and response["Location"].endswith("/password_reset/done/")
    assert len(mail.outbox) == 1 and "/accounts/reset/" in mail.outbox[0].body


def test_reset_requests_are_throttled_per_address_and_per_email(email_on: Any) -> None:
    # The counts live in Redis for the cool-off: fresh addresses and emails for each run.
    here, there = (f"fd00::{uuid.uuid4().hex[:4]}:{uuid.uuid4().hex[:4]}" for _ in "ab")
    x, y, z = (f"{name}-{uuid.uuid4().hex}@example.com" for name in "xyz")
    client = Client(REMOTE_ADDR=here)
    for _ in range(3):
        assert client.post("/accounts/password_reset/", {"email": x}).status_code == 302
    refused = client.post("/accounts/password_reset/", {"email": y})
    assert refused.status_code == 429 and b"Too many requests" in refused.content
    # The same email address from elsewhere is refused too: no flooding one inbox.
    elsewhere = Client(REMOTE_ADDR=there)
    assert elsewhere.post("/accounts/password_reset/", {"email": x}).status_code == 429
    assert elsewhere.post("/accounts/password_reset/", {"email": z}).status_code == 302
