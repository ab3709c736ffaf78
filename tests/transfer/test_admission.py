"""One validator for the API and the importer (SPEC §11.2, CONTRACT "Input that is refused"):
what the API refuses the importer refuses, with the line; what the API accepts exports and
imports back exactly; and an import reads a hostile line in bounded memory."""

from __future__ import annotations

import gzip
import io
import itertools
import json
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from memory.models import Namespace
from memory.services import namespace_create, observation_ingest, token_create
from memory.services.transfer import ImportRefused, namespace_export, namespace_import
from memory.services.transfer.schema import BY_TYPE
from tests.support.transfer import file_normal_form

pytestmark = pytest.mark.django_db

_names = itertools.count(1)


def export_text(ns) -> str:
    out = io.BytesIO()
    namespace_export(ns, out)
    return out.getvalue().decode()


def api_for(ns) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token_create(namespace=ns, client='t').key}")
    return api


def post(api, ns, body):
    return api.post(f"/api/v1/namespaces/{ns.name}/observations/?wait=1", json.dumps(body),
                    content_type="application/json")


@pytest.mark.parametrize("number", [1e300, -1e300, 2.0**53 + 2, 9007199254740992])
def test_metadata_the_importer_could_not_restore_is_refused_at_the_api(number):
    ns = namespace_create(name=f"adm-{next(_names)}")
    r = post(api_for(ns), ns, {"facts": [{"key": "k", "value": "v",
                                          "metadata": {"a": number}}]})
    assert r.status_code == 400, r.content
    assert r.json()["field"].startswith("facts") and "9007199254740991" in r.json()["error"]
    assert not ns.evidence.exists()


def _edit_observation(exported: str, changes: dict) -> list[str]:
    lines = exported.splitlines()
    at = next(i for i, line in enumerate(lines) if '"type":"observation"' in line)
    record = json.loads(lines[at])
    record.update(changes)
    lines[at] = json.dumps(record, ensure_ascii=False)
    return lines


@pytest.mark.parametrize(("change", "field"), [
    ({"text": "x" * 100_001}, "observation.text"),
    ({"facts": [{"key": f"k{i}", "value": "v"} for i in range(501)]}, "observation.facts"),
    ({"facts": [{"key": "k", "value": "v" * 10_001}]}, "observation.facts[0].value"),
    ({"facts": [{"key": "k", "value": "v", "metadata": {"a": 10**300}}]},
     "observation.facts[0].metadata"),
    ({"facts": [{"key": "!!!", "value": "v"}]}, "observation.facts[0].key"),
    ({"source": "p\u0430yroll"}, "observation.source"),  # Cyrillic а among Latin
])
def test_a_record_over_the_apis_limits_is_refused_with_its_line(tmp_path, change, field):
    ns = namespace_create(name=f"adm-{next(_names)}")
    observation_ingest(namespace=ns, text="city = Rome")
    lines = _edit_observation(export_text(ns), change)
    path = tmp_path / "edited.ndjson"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ImportRefused) as refused:
        namespace_import(path, name="edited")
    assert refused.value.line == 3 and refused.value.message.startswith(field), refused.value
    assert not Namespace.objects.filter(name="edited").exists()


def test_a_hostile_long_line_is_refused_with_its_number_in_bounded_memory(tmp_path, settings):
    # Small limits make the longest legitimate line ~7 MB; the file's line is 200 MB.
    settings.PMEM_MAX_FACTS, settings.PMEM_MAX_VALUE_CHARS = 5, 100
    counts = dict.fromkeys(BY_TYPE, 0) | {"namespace": 1}
    header = json.dumps({"format": "pmem-export", "version": 2, "namespace": "h",
                         "counts": counts})
    path = tmp_path / "hostile.ndjson.gz"
    with gzip.open(path, "wb", compresslevel=1) as out:
        out.write(header.encode() + b"\n" + b'{"type":"namespace","name":"')
        block = b"a" * (1 << 20)
        for _ in range(200):
            out.write(block)
        out.write(b'"}\n')
    assert path.stat().st_size < 2_000_000
    tracemalloc.start()
    try:
        with pytest.raises(ImportRefused) as refused:
            namespace_import(path, name="hostile")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert refused.value.line == 2 and "longer than" in refused.value.message
    assert peak < 40 * (1 << 20), peak  # the limit and a chunk, not the line


# --- the round trip of what the API accepts ------------------------------------------------

_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",),
                                       exclude_characters="\x00"), max_size=40)
_number = st.one_of(st.integers(-(2**53) + 1, 2**53 - 1),
                    st.floats(-(2.0**53), 2.0**53, allow_nan=False, allow_infinity=False),
                    st.sampled_from([1e-300, -0.0, 0.1, 2.0**53 - 1, 5e-324]))
_meta_value = st.one_of(_number, st.booleans(), st.text(max_size=30).filter(
    lambda s: "\x00" not in s and not any(0xD800 <= ord(c) <= 0xDFFF for c in s)))
_metadata = st.dictionaries(st.text(min_size=1, max_size=12).filter(str.isprintable),
                            _meta_value, max_size=4)
_key = st.text(alphabet=st.characters(categories=("L", "N", "P", "Zs")), min_size=1,
               max_size=12).filter(lambda k: any(c.isalnum() for c in k))
_fact = st.fixed_dictionaries({"key": _key, "value": _text.filter(lambda v: v.strip() != "")},
                              optional={"metadata": _metadata})
_observation = st.fixed_dictionaries({}, optional={
    "text": _text, "facts": st.lists(_fact, min_size=1, max_size=3),
    "source": st.sampled_from(["", "crm", "Ｃｒｍ", "東京", "café"])})


@settings(max_examples=20, deadline=None, derandomize=True, phases=[Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(bodies=st.lists(_observation, min_size=1, max_size=4))
def test_every_namespace_the_api_produces_exports_and_imports_back_exactly(bodies, tmp_path):
    ns = namespace_create(name=f"adm-{next(_names)}")
    api = api_for(ns)
    accepted = 0
    for body in bodies:
        r = post(api, ns, body)
        assert r.status_code in (201, 400), r.content
        accepted += r.status_code == 201
    text = export_text(ns)
    path = Path(tmp_path) / f"{ns.name}.ndjson"
    path.write_text(text)
    copy = namespace_import(path, name=f"{ns.name}-copy").namespace
    assert file_normal_form(export_text(copy)) == file_normal_form(text)
    assert copy.evidence.count() == accepted


def test_edge_metadata_the_api_accepts_round_trips_exactly(tmp_path):
    edge = {"max": 2**53 - 1, "min": -(2**53) + 1, "big_float": 9007199254740991.0,
            "tiny": 5e-324, "tenth": 0.1, "neg_zero": -0.0, "yes": True, "no": False,
            "k" * 64: "s" * 500, "unicode": "東京 \u2028 é\u0301 🙂", "empty": ""}
    edge |= {f"n{i}": i for i in range(32 - len(edge))}
    ns = namespace_create(name=f"adm-{next(_names)}")
    r = post(api_for(ns), ns, {"facts": [{"key": "k", "value": "v", "metadata": edge}]})
    assert r.status_code == 201, r.content
    text = export_text(ns)
    path = Path(tmp_path) / "edge.ndjson"
    path.write_text(text)
    copy = namespace_import(path, name=f"{ns.name}-copy").namespace
    assert file_normal_form(export_text(copy)) == file_normal_form(text)
    got = api_for(copy).get(f"/api/v1/namespaces/{copy.name}/cells/k/").json()["metadata"]
    assert got == edge
