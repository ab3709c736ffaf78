"""pmem_client's pure parts: error mapping and Retry-After (no server needed)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

import pmem_client
from pmem_client import _protocol as p
from pmem_client.errors import error_for


@pytest.mark.parametrize(("status", "cls"), [
    (400, pmem_client.BadRequest), (401, pmem_client.Unauthorized),
    (403, pmem_client.Forbidden), (404, pmem_client.NotFound), (409, pmem_client.Conflict),
    (413, pmem_client.PayloadTooLarge), (429, pmem_client.RateLimited),
    (500, pmem_client.ServerError), (503, pmem_client.ServerError), (418, pmem_client.ApiError),
])
def test_each_status_maps_to_its_exception(status, cls):
    error = error_for(status, {"error": "why", "field": "facts[0].key"})
    assert type(error) is cls and error.error == "why" and error.status == status


def test_conflict_carries_the_reason_and_bad_request_the_field():
    assert error_for(409, {"error": "invalid: revoke needs a head"}).reason == \
        "invalid: revoke needs a head"
    assert error_for(400, {"error": "text: give text", "field": "text"}).field == "text"
    assert error_for(502, "<html>bad gateway</html>").error == "HTTP 502"
    assert error_for(502, "upstream timed out").error == "upstream timed out"


def test_an_html_page_from_a_server_in_front_becomes_a_short_message():
    """Gunicorn, a proxy: their error pages are markup, never what a tool should show."""
    page = ("<html>\n  <head>\n    <title>Request Header Fields Too Large</title>\n  </head>"
            "<body><h1><p>Request Header Fields Too Large</p></h1>Error parsing headers: "
            "'limit request headers fields size'</body></html>")
    error = error_for(431, page)
    assert type(error) is pmem_client.RequestTooLong
    assert error.error == "HTTP 431: Request Header Fields Too Large"
    assert type(error_for(414, {"error": "request line too long"})) is pmem_client.RequestTooLong


def test_a_reused_idempotency_key_is_its_own_conflict_naming_the_first_observation():
    error = error_for(409, {"error": "idempotency_key was already used", "field":
                            "idempotency_key", "observation": 12})
    assert type(error) is pmem_client.IdempotencyConflict
    assert isinstance(error, pmem_client.Conflict) and error.observation_id == 12
    assert type(error_for(409, {"error": "revoke needs a head"})) is pmem_client.Conflict


def test_retry_after_takes_seconds_or_an_http_date():
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert p.retry_after_seconds("3") == 3.0
    assert p.retry_after_seconds(format_datetime(now + timedelta(seconds=7), usegmt=True),
                                 now=now) == 7.0
    assert p.retry_after_seconds("soon") is None and p.retry_after_seconds(None) is None
    assert p.Retry(max_retry_after=5).delay(1, retry_after=600) == 5
    assert 0.125 <= p.Retry(backoff=0.25).delay(1) <= 0.25


def test_next_links_are_rebased_on_the_clients_root():
    assert p.rebase("http://internal:8000/api/v1/x/?after=k", "http://proxy:9/") == \
        "http://proxy:9/api/v1/x/?after=k"
