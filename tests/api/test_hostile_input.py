"""Keys in every script through the API (SPEC §1), and the small things a hostile client
tried: Unicode digits in query parameters, a JSON body nested 100,000 deep."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest

from memory.models import Cell, Evidence, Version
from memory.selectors.cells import cell_detail
from tests.api.test_api import accept, base, post

pytestmark = pytest.mark.django_db

#: Raw key -> (canonical key, value): CJK, Cyrillic, Arabic, Devanagari (marks kept), emoji
#: among letters, digits that differ only by the script's letters before them.
KEYS = {
    "電話 1": ("電話_1", "+81-3-1234"),
    "住所 1": ("住所_1", "Tokyo"),
    "密码2": ("密码2", "hunter2"),
    "ключ2": ("ключ2", "дверь"),
    "пароль": ("пароль", "секрет"),
    "مفتاح الباب": ("مفتاح_الباب", "تحت السجادة"),
    "कि": ("कि", "one"),
    "का": ("का", "two"),
    "favourite 🍕 food": ("favourite_food", "pizza"),
}


def _values(ns) -> dict[str, str | None]:
    return {c.key: (c.head.value if c.head else None)
            for c in Cell.objects.filter(namespace=ns).select_related("head")}


def test_keys_of_every_script_stay_apart_as_facts(api, ns, commit_pending):
    facts = [{"key": raw, "value": value} for raw, (_, value) in KEYS.items()]
    assert post(api, base(ns) + "observations/", {"facts": facts}).status_code == 202
    commit_pending()
    assert _values(ns) == {key: value for key, value in KEYS.values()}
    assert not Version.objects.filter(namespace=ns, status="superseded").exists()


def test_key_value_lines_in_every_script_stay_apart(api, ns, commit_pending):
    """The probe: the address must not supersede the phone number. (A ``key = value`` line's
    key is letters, marks, digits and identifier punctuation: the emoji key is a fact's.)"""
    lines = {raw: kv for raw, kv in KEYS.items() if "🍕" not in raw}
    text = "\n".join(f"{raw} = {value}" for raw, (_, value) in lines.items())
    assert post(api, base(ns) + "observations/", {"text": text}).status_code == 202
    commit_pending()
    assert _values(ns) == {key: value for key, value in lines.values()}


def test_cell_endpoints_take_keys_of_every_script_raw_or_canonical(api, ns):
    accept(ns, "電話 1", "+81-3-1234")
    for spelling in ("電話_1", "電話 1", "電話　1"):  # canonical; a space; an ideographic space
        url = base(ns) + f"cells/{quote(spelling)}/"
        body = api.get(url).json()
        assert (body["key"], body["value"]) == ("電話_1", "+81-3-1234"), spelling
    graph = api.get(base(ns) + f"cells/{quote('電話_1')}/graph/")
    assert graph.status_code == 200 and graph.json()["key"] == "電話_1"
    r = post(api, base(ns) + f"cells/{quote('कि')}/operations/", {"op": "accept", "value": "x"})
    assert r.status_code == 201 and r.json()["cell"]["key"] == "कि"
    assert cell_detail(namespace=ns, key="का") is None  # the vowel sign keeps them apart


def test_a_fact_whose_key_normalises_to_nothing_is_400_naming_the_fact(api, ns):
    facts = [{"key": "a", "value": "1"}, {"key": "b", "value": "2"}, {"key": "c", "value": "3"},
             {"key": "🍕 ✓ !", "value": "4"}]
    r = post(api, base(ns) + "observations/", {"facts": facts})
    assert r.status_code == 400, r.content
    assert r.json()["field"] == "facts[3].key"
    assert "no letters, marks or digits" in r.json()["error"]
    assert not Evidence.objects.filter(namespace=ns).exists()


def test_a_key_too_long_once_normalised_is_400(api, ns):
    # U+FDFA is one character that NFKC writes as 18 letters: 20 of them make 360.
    r = post(api, base(ns) + "observations/", {"facts": [{"key": "\ufdfa" * 20, "value": "v"}]})
    assert r.status_code == 400 and r.json()["field"] == "facts[0].key"
    r = post(api, base(ns) + f"cells/{quote(chr(0xFDFA) * 20)}/operations/",
             {"op": "accept", "value": "v"})
    assert r.status_code == 400 and r.json()["field"] == "key"


def test_cell_endpoints_with_a_key_that_normalises_to_nothing(api, ns):
    pizza = quote("🍕")
    assert api.get(base(ns) + f"cells/{pizza}/").status_code == 404
    assert api.get(base(ns) + f"cells/{pizza}/graph/").status_code == 404
    assert api.delete(base(ns) + f"cells/{pizza}/").status_code == 404
    r = post(api, base(ns) + f"cells/{pizza}/operations/", {"op": "accept", "value": "v"})
    assert r.status_code == 400 and r.json()["field"] == "key", r.content
    assert not Cell.objects.filter(namespace=ns).exists()


# --- query parameters and bodies ------------------------------------------------------------------


@pytest.mark.parametrize(("query", "field"), [
    ("cells/?limit=²", "limit"), ("cells/?limit=①", "limit"), ("cells/?limit=٣", "limit"),
    ("cells/?limit=+3", "limit"), ("operations/?limit=²", "limit"),
    ("operations/?before=²", "before"), ("operations/?before=①", "before"),
    ("operations/?before=%EF%BC%93", "before"),  # a full-width 3
])
def test_unicode_digits_in_query_parameters_are_400_naming_the_parameter(api, ns, query, field):
    r = api.get(base(ns) + query)
    assert r.status_code == 400, r.content
    assert r.json()["field"] == field


def test_ascii_digits_still_page(api, ns):
    for i in range(3):
        accept(ns, f"k{i}", "v")
    body = api.get(base(ns) + "cells/?limit=2").json()
    assert len(body["results"]) == 2 and body["next"]
    assert len(api.get(base(ns) + "operations/?limit=1&before=999999").json()["results"]) == 1


@pytest.mark.parametrize("path", ["observations/", "read/", "answer/", "cells/k/operations/"])
@pytest.mark.parametrize("depth", [100_000, 40])
def test_a_deeply_nested_json_body_is_400_naming_the_body(api, ns, path, depth):
    accept(ns, "k", "v")
    body = "[" * depth + "]" * depth
    r = api.post(base(ns) + path, body, content_type="application/json")
    assert r.status_code == 400, r.content[:200]
    assert r.json()["field"] == "body" and "nested deeper" in r.json()["error"]


def test_a_body_nested_a_few_hundred_deep_in_a_field_is_400_not_a_crash(api, ns):
    """Parsed, it would still blow the stack later, when the choice field's error message
    quotes it."""
    deep = json.loads("[" * 900 + "]" * 900)
    r = post(api, base(ns) + "read/", {"query": "q", "mode": deep})
    assert r.status_code == 400 and r.json()["field"] == "body"


def test_an_ordinary_body_is_not_too_deep(api, ns):
    r = post(api, base(ns) + "observations/", {"facts": [{"key": "k", "value": "v"}]})
    assert r.status_code == 202
