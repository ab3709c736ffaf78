"""An idempotency key replays only the request it was first used for (Stripe's semantics;
CONTRACT, "Input that is refused"): the probe's reuse with another body no longer drops the
new payload behind a 201."""

from __future__ import annotations

import pytest

from memory.models import Evidence
from tests.api.test_api import base, post

pytestmark = pytest.mark.django_db

FIRST = {"facts": [{"key": "door", "value": "open"}], "source": "cam",
         "observed_at": "2026-12-01T10:00:00+01:00", "idempotency_key": "req-1"}


def send(api, ns, body, wait=False):
    return post(api, base(ns) + "observations/" + ("?wait=1" if wait else ""), body)


@pytest.mark.parametrize("change", [
    {"facts": [{"key": "door", "value": "shut"}]}, {"text": "door = shut"}, {"source": "mic"},
    {"observed_at": "2026-12-01T10:00:01+01:00"}, {"facts": [{"key": "door", "value": "open",
                                                              "op": "contest"}]},
])
def test_the_same_key_with_another_body_is_409_naming_the_first(api, ns, change):
    first = send(api, ns, FIRST).json()
    again = send(api, ns, {**FIRST, **change})
    assert again.status_code == 409
    assert again.json()["field"] == "idempotency_key"
    assert again.json()["observation"] == first["id"]
    stored = Evidence.objects.get(namespace=ns)  # the first untouched, nothing added
    assert stored.pk == first["id"] and [f["value"] for f in stored.facts] == ["open"]


def test_the_same_request_replays_whatever_its_json_order_or_offset(api, ns):
    first = send(api, ns, FIRST).json()
    same = {**dict(reversed(FIRST.items())), "observed_at": "2026-12-01T09:00:00Z"}
    again = send(api, ns, same)
    assert again.status_code == 202 and again.json() == {**first, "replayed": True}
    assert Evidence.objects.filter(namespace=ns).count() == 1


def test_a_replay_that_waits_says_it_is_one(api, ns, commit_pending):
    """The probe: with wait=1 the replay answered 201 and replayed stayed false."""
    send(api, ns, FIRST)
    commit_pending()
    again = send(api, ns, FIRST, wait=True)
    assert again.status_code == 201 and again.json()["replayed"] is True
    assert again["Idempotent-Replayed"] == "true"
    assert send(api, ns, {**FIRST, "source": "mic"}, wait=True).status_code == 409


def test_keys_are_per_namespace(api, ns, make_namespace, client_for):
    other = make_namespace("other")
    send(api, ns, FIRST)
    elsewhere = send(client_for(other), other, {**FIRST, "source": "mic"})
    assert elsewhere.status_code == 202 and elsewhere.json()["replayed"] is False


def test_a_key_recorded_before_digests_were_kept_replays(api, ns):
    first = send(api, ns, FIRST).json()
    Evidence.objects.filter(pk=first["id"]).update(request_digest=None)
    again = send(api, ns, {**FIRST, "source": "mic"})
    assert again.status_code == 202 and again.json()["replayed"] is True
