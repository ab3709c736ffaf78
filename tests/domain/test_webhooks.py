"""Webhook signing (Standard Webhooks), the targets a webhook may call, and its backoff."""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
from datetime import UTC, datetime, timedelta

import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from memory.domain.webhooks import (
    TargetRefused,
    backoff_seconds,
    clean_ops,
    event_body,
    new_secret,
    parse_target,
    refused_address,
    signed_headers,
    webhook_id,
)

EVENT = {"cursor": 7, "op": "accept", "key": "city", "value": "Zürich"}


def test_the_standard_webhooks_verifier_accepts_our_signature() -> None:
    secret = new_secret()
    body = event_body(EVENT)
    headers = signed_headers(secret, webhook_id(3, 7), body, datetime.now(UTC))
    assert Webhook(secret).verify(body, headers) == EVENT


def test_the_signature_is_hmac_sha256_over_id_timestamp_and_body_keyed_by_the_secret() -> None:
    secret = new_secret()
    assert secret.startswith("whsec_")
    body = event_body(EVENT)
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    headers = signed_headers(secret, "evt_3_7", body, at)
    key = base64.b64decode(secret.removeprefix("whsec_"))
    mac = hmac.new(key, b"evt_3_7." + str(int(at.timestamp())).encode() + b"." + body,
                   hashlib.sha256).digest()
    assert headers["webhook-signature"] == "v1," + base64.b64encode(mac).decode()
    assert headers["webhook-timestamp"] == str(int(at.timestamp()))
    assert headers["webhook-id"] == "evt_3_7"


def test_a_changed_body_or_another_secret_fails_verification() -> None:
    secret = new_secret()
    body = event_body(EVENT)
    headers = signed_headers(secret, "evt_1_1", body, datetime.now(UTC))
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body.replace(b"city", b"town"), headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(body, headers)


def test_a_redelivery_keeps_the_webhook_id_and_signs_its_own_timestamp() -> None:
    secret = new_secret()
    body = event_body(EVENT)
    now = datetime.now(UTC)
    first = signed_headers(secret, webhook_id(3, 7), body, now - timedelta(seconds=90))
    again = signed_headers(secret, webhook_id(3, 7), body, now)
    assert first["webhook-id"] == again["webhook-id"]
    assert first["webhook-signature"] != again["webhook-signature"]
    assert webhook_id(3, 7) != webhook_id(3, 8) != webhook_id(4, 7)


@pytest.mark.parametrize("url", ["ftp://example.com/x", "file:///etc/passwd", "gopher://h/",
                                 "http:///nohost", "https://user:pw@example.com/", "example.com",
                                 "http://example.com:99999/"])
def test_only_http_urls_with_a_host_and_no_credentials_are_targets(url: str) -> None:
    with pytest.raises(TargetRefused):
        parse_target(url)


def test_a_target_keeps_host_port_path_and_query() -> None:
    t = parse_target("HTTPS://Hooks.Example.com/in?x=1")
    assert (t.scheme, t.host, t.port, t.path) == ("https", "hooks.example.com", 443, "/in?x=1")
    assert parse_target("http://[2001:db8::1]:8080").path == "/"
    assert parse_target("http://[2001:db8::1]:8080").host == "2001:db8::1"


@pytest.mark.parametrize("address", [
    "127.0.0.1", "127.9.9.9", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254",
    "100.64.0.1", "0.0.0.0", "224.0.0.1", "240.0.0.1", "255.255.255.255", "::1", "::",
    "fe80::1", "fc00::1", "fd12:3456::1", "ff02::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1",
    "::ffff:169.254.169.254", "2001:db8::1", "192.0.2.1",
])
def test_loopback_private_link_local_and_reserved_addresses_are_refused(address: str) -> None:
    assert refused_address(ipaddress.ip_address(address), allow_private=False) is not None


@pytest.mark.parametrize("address", ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111",
                                     "::ffff:93.184.216.34"])
def test_global_addresses_are_allowed(address: str) -> None:
    assert refused_address(ipaddress.ip_address(address), allow_private=False) is None


def test_allowing_private_targets_still_refuses_unspecified_and_multicast() -> None:
    for address in ("127.0.0.1", "10.0.0.1", "::1", "fe80::1"):
        assert refused_address(ipaddress.ip_address(address), allow_private=True) is None
    for address in ("0.0.0.0", "::", "224.0.0.1", "ff02::1"):
        assert refused_address(ipaddress.ip_address(address), allow_private=True) is not None


def test_backoff_doubles_up_to_its_cap() -> None:
    assert [backoff_seconds(n, base=2, cap=20) for n in range(1, 7)] == [2, 4, 8, 16, 20, 20]
    assert backoff_seconds(10_000, base=1, cap=600) == 600


def test_the_ops_filter_takes_known_ops_only() -> None:
    assert clean_ops(["Reject", " accept", "accept", ""]) == ["accept", "reject"]
    assert clean_ops(None) == []
    assert clean_ops(["erase", "reinstate", "expire"]) == ["erase", "expire", "reinstate"]
    with pytest.raises(ValueError, match="bogus"):
        clean_ops(["bogus"])
