"""Times the API cannot hold are 400s naming the field, on every endpoint that takes one
(CONTRACT, "Input that is refused") — the black-box probe's 500s among them."""

from __future__ import annotations

import pytest

from memory.models import Evidence
from tests.api.test_api import accept, base, post

pytestmark = pytest.mark.django_db(transaction=True)  # a failed statement must not hide the next

REFUSED = {
    "2026-12-01T10:00:00+16:00": "±15:59",  # PostgreSQL: time zone displacement out of range
    "2026-12-01T10:00:00 16:00": "±15:59",  # the same with its '+' unencoded
    "9999-12-31T23:59:59-14:00": "years 1 to 9999",  # year 10000 in UTC
    "0001-01-01T00:00:00+14:00": "years 1 to 9999",  # year 0 in UTC
    "2026-12-01T10:00:00": "needs a zone",
}


@pytest.fixture
def keyed(api, ns):
    api.raise_request_exception = False
    accept(ns, "k", "a")
    accept(ns, "k", "b")
    return api


@pytest.mark.parametrize("raw", list(REFUSED))
@pytest.mark.parametrize("path", ["cells/", "cells/k/", "cells/k/history/", "cells/k/graph/"])
def test_as_of_past_what_postgresql_holds_is_400_naming_it(keyed, ns, path, raw):
    response = keyed.get(base(ns) + path, {"as_of": raw})
    assert response.status_code == 400, response.content
    assert response.json()["field"] == "as_of" and REFUSED[raw] in response.json()["error"]


@pytest.mark.parametrize("raw", list(REFUSED))
def test_a_read_as_of_past_what_postgresql_holds_is_400_naming_it(keyed, ns, raw):
    response = post(keyed, base(ns) + "read/", {"query": "k", "as_of": raw})
    assert response.status_code == 400, response.content
    assert response.json()["field"] == "as_of" and REFUSED[raw] in response.json()["error"]


@pytest.mark.parametrize("raw", [r for r in REFUSED if "zone" not in REFUSED[r]])
def test_observed_at_past_what_postgresql_holds_is_400_and_stores_nothing(keyed, ns, raw):
    response = post(keyed, base(ns) + "observations/", {"text": "k = c", "observed_at": raw})
    assert response.status_code == 400, response.content
    assert response.json()["field"] == "observed_at" and REFUSED[raw] in response.json()["error"]
    assert not Evidence.objects.filter(namespace=ns).exists()


def test_observed_at_is_stored_in_utc_and_a_zone_less_one_refused(keyed, ns):
    first = post(keyed, base(ns) + "observations/",
                 {"text": "k = c", "observed_at": "2026-12-01T10:00:00+14:00"}).json()
    second = post(keyed, base(ns) + "observations/",
                  {"text": "k = d", "observed_at": "2026-12-01T10:00:00"})
    assert second.status_code == 400 and second.json()["field"] == "observed_at"
    stored = dict(Evidence.objects.filter(namespace=ns).values_list("id", "observed_at"))
    assert stored == {first["id"]: stored[first["id"]]}
    assert stored[first["id"]].isoformat() == "2026-11-30T20:00:00+00:00"


def test_an_as_of_at_the_edge_of_the_calendar_reads(keyed, ns):
    response = keyed.get(base(ns) + "cells/k/", {"as_of": "9999-12-31T23:59:59.999999Z"})
    assert response.status_code == 200 and response.json()["value"] == "b"
    response = keyed.get(base(ns) + "cells/k/", {"as_of": "0001-01-01T00:00:00Z"})
    assert response.status_code == 200 and response.json()["value"] is None
