"""Operating it (CONTRACT): /livez, /healthz, /metrics and its access rule, and the 503 that a
database which cannot be reached answers (a real refused connection: the default connection
is pointed at a closed port for the request)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

import pytest
from django.db import connections
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from memory.llm.client import ModelClient
from memory.llm.errors import ContentError, TransportError
from memory.llm.extraction import extract_facts
from memory.services import namespace_drain, token_create
from tests.support.scripted_llm import Fault, ScriptedLLM

FAMILIES = {
    "pmem_observations_recorded", "pmem_observations_committed", "pmem_observations_failed",
    "pmem_unsettled_observations", "pmem_oldest_unsettled_seconds", "pmem_commit_seconds",
    "pmem_model_request_seconds", "pmem_model_errors", "pmem_http_requests",
    "pmem_http_request_seconds", "pmem_webhook_deliveries", "pmem_webhook_oldest_undelivered_seconds",
}
#: The only label names any family may carry: none of them is a namespace, key or value.
LABELS = {"kind", "reason", "view", "method", "status", "cause", "outcome", "le"}


def scrape(client: Client, **headers: str) -> dict[str, dict[tuple, float]]:
    answer = client.get("/metrics", **headers)
    assert answer.status_code == 200, answer.content
    assert answer["Content-Type"].startswith("text/plain; version=0.0.4")
    out: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(answer.content.decode()):
        samples = out.setdefault(family.name, {})
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(families: dict[str, dict[tuple, float]], family: str, sample: str,
          **labels: str) -> float:
    return families.get(family, {}).get((sample, tuple(sorted(labels.items()))), 0.0)


def test_livez_answers_without_asking_anything(client: Client) -> None:
    answer = client.get("/livez")
    assert answer.status_code == 200 and answer.json() == {"status": "alive"}


@pytest.mark.django_db(transaction=True)
def test_metrics_move_with_real_work_and_no_label_names_a_namespace(client: Client, ns) -> None:
    api = Client(HTTP_AUTHORIZATION=f"Token {token_create(namespace=ns, client='m').key}")
    before = scrape(client)
    for i in range(3):
        posted = api.post(f"/api/v1/namespaces/{ns.name}/observations/",
                          {"facts": [{"key": "secret_key_name", "value": f"secret-{i}"}]},
                          content_type="application/json")
        assert posted.status_code == 202
    pending = scrape(client)
    assert value(pending, "pmem_unsettled_observations", "pmem_unsettled_observations") >= 3
    namespace_drain(namespace_id=ns.pk)
    after = scrape(client)
    # Every family CONTRACT names (model errors appear with the first one: the next test).
    assert FAMILIES - {"pmem_model_errors"} <= set(after), FAMILIES - set(after)
    moved = {name: value(after, name, f"{name}_total") - value(before, name, f"{name}_total")
             for name in ("pmem_observations_recorded", "pmem_observations_committed")}
    assert moved == {"pmem_observations_recorded": 3, "pmem_observations_committed": 3}
    assert (value(after, "pmem_commit_seconds", "pmem_commit_seconds_count")
            > value(before, "pmem_commit_seconds", "pmem_commit_seconds_count"))
    post = dict(view="api-observations", method="POST", status="202")
    assert (value(after, "pmem_http_requests", "pmem_http_requests_total", **post)
            - value(before, "pmem_http_requests", "pmem_http_requests_total", **post)) == 3
    text = client.get("/metrics").content.decode()
    assert ns.name not in text and "secret_key_name" not in text and "secret-1" not in text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            assert set(sample.labels) <= LABELS, (family.name, sample.labels)


def test_model_latency_by_kind_and_errors_by_reason(client: Client) -> None:
    with ScriptedLLM() as server:
        model = ModelClient(base_url=server.base_url, model=server.model, max_retries=0)
        before = scrape(client)
        assert extract_facts(model, "colour = blue").failure is None
        server.push(Fault.HTTP_500, job="extraction")
        failed = extract_facts(model, "colour = red").failure
        assert isinstance(failed, TransportError) and failed.status == 500
        server.push(Fault.INVALID_JSON, job="extraction")
        unusable = extract_facts(model, "colour = green").failure
        assert isinstance(unusable, ContentError) and unusable.reason == "unparsable"
        after = scrape(client)
    assert "pmem_model_errors" in after
    name = "pmem_model_request_seconds"
    assert (value(after, name, f"{name}_count", kind="extract")
            - value(before, name, f"{name}_count", kind="extract")) == 3
    errors = "pmem_model_errors"
    for reason in ("http_5xx", "unparsable"):
        assert (value(after, errors, f"{errors}_total", kind="extract", reason=reason)
                - value(before, errors, f"{errors}_total", kind="extract", reason=reason)) == 1


def test_metrics_are_refused_from_elsewhere_unless_the_token_is_sent(client: Client,
                                                                     settings) -> None:
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 403
    # Through a proxy on the same host the address is the proxy's: not "from 127.0.0.1".
    assert client.get("/metrics", HTTP_X_FORWARDED_FOR="203.0.113.9").status_code == 403
    settings.PMEM_METRICS_TOKEN = "s3cret-token"
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3",
                      HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3",
                      HTTP_AUTHORIZATION="Bearer s3cret-token").status_code == 200


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens there once it is closed


@contextlib.contextmanager
def database_unreachable(blocker) -> Iterator[None]:
    connection = connections["default"]
    saved = dict(connection.settings_dict)
    with blocker.unblock():
        connection.close()
        connection.settings_dict.update(HOST="127.0.0.1", PORT=str(_closed_port()))
        try:
            yield
        finally:
            connection.close()
            connection.settings_dict.clear()
            connection.settings_dict.update(saved)


def test_an_unreachable_database_answers_503_with_retry_after(django_db_blocker) -> None:
    browser = Client(raise_request_exception=False)
    browser.cookies["sessionid"] = "a-session-to-look-up"  # a logged-in person's page
    with database_unreachable(django_db_blocker):
        api = browser.post("/api/v1/namespaces/demo/observations/", {"text": "a = b"},
                           content_type="application/json", HTTP_AUTHORIZATION="Token x")
        page = browser.get("/ns/demo/")
        health = browser.get("/healthz")
        live = browser.get("/livez")
    assert api.status_code == 503 and api["Retry-After"].isdigit()
    assert api.json()["error"].startswith("database unavailable")
    assert page.status_code == 503 and page["Retry-After"].isdigit()
    assert b"Memory is unavailable for a moment" in page.content
    assert health.status_code == 503 and health.json()["database"] != "ok"
    assert health.json()["status"] == "error"
    assert live.status_code == 200


@pytest.mark.django_db
def test_every_family_and_its_known_labels_are_exposed_before_the_first_event(
        client: Client) -> None:
    """An alert on a failure rate needs its series before the first failure (the HTTP
    families count by view: the first scrape is their first request)."""
    scrape(client)
    families = scrape(client)
    for family in (*FAMILIES, "pmem_task_retries", "pmem_http_unavailable"):
        assert families.get(family), family
    errors = {labels for _, labels in families["pmem_model_errors"]}
    for kind in ("extract", "annotate", "answer", "prune", "embed"):
        for reason in ("timeout", "http_5xx", "unparsable", "no_choices"):
            assert (("kind", kind), ("reason", reason)) in errors, (kind, reason)
    causes = {labels for _, labels in families["pmem_task_retries"]}
    assert {(("cause", c),) for c in ("model", "database", "broker")} <= causes
