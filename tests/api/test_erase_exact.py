"""The erase is exact (SPEC §6, §11.3), through the public surface: whole tokens only, another
kept fact's words untouched, and the key's name and metadata gone from observations and
exports, the audit keeping a digest."""

from __future__ import annotations

import io
import json

import pytest

from memory.models import EraseAudit, Namespace
from memory.services.erase import key_digest
from memory.services.transfer import namespace_export

pytestmark = pytest.mark.django_db


def base(ns) -> str:
    return f"/api/v1/namespaces/{ns.name}/"


def observe(api, ns, body) -> int:
    r = api.post(base(ns) + "observations/?wait=1", json.dumps(body),
                 content_type="application/json")
    assert r.status_code == 201, r.content
    return r.json()["id"]


def export_of(ns: Namespace) -> str:
    out = io.BytesIO()
    namespace_export(ns, out)
    return out.getvalue().decode()


def test_erasing_rk1_leaves_rk10_and_val10_whole(api, ns):
    text = "\n".join(f"rk{i} = val{i}" for i in range(13))
    obs = observe(api, ns, {"text": text})

    assert api.delete(base(ns) + "cells/rk1/").status_code == 204

    seen = api.get(base(ns) + f"observations/{obs}/").json()
    lines = seen["text"].split("\n")
    assert lines[1] == "[erased] = [erased]"
    assert lines[:1] + lines[2:] == [f"rk{i} = val{i}" for i in range(13) if i != 1]
    for i in (10, 11, 12):
        assert api.get(base(ns) + f"cells/rk{i}/").json()["value"] == f"val{i}"


def test_another_kept_facts_value_is_never_touched(api, ns):
    obs = observe(api, ns, {"text": "trip", "facts": [
        {"key": "e1", "value": "Lisbon"}, {"key": "e2", "value": "Lisbon-north"},
        {"key": "e3", "value": "LISBON"}]})

    assert api.delete(base(ns) + "cells/e1/").status_code == 204

    facts = api.get(base(ns) + f"observations/{obs}/").json()["facts"]
    assert [(f["key"], f["value"]) for f in facts] == [
        ("[erased]", "[erased]"), ("e2", "Lisbon-north"), ("e3", "LISBON")]
    assert api.get(base(ns) + "cells/e2/").json()["value"] == "Lisbon-north"


def test_the_keys_name_and_metadata_leave_observations_and_exports(api, ns):
    ids = [observe(api, ns, {"text": f"I keep my secret_code as Zq{i}x here", "facts": [
        {"key": "secret_code", "value": f"Zq{i}x", "metadata": {"note": "META-ALPHA-77",
                                                                "n": 77}},
        {"key": "colour", "value": f"red{i}"}]}) for i in range(5)]
    assert "META-ALPHA-77" in export_of(ns)

    assert api.delete(base(ns) + "cells/secret_code/").status_code == 204

    for obs in ids:
        body = json.dumps(api.get(base(ns) + f"observations/{obs}/").json())
        assert "secret_code" not in body and "META-ALPHA-77" not in body, body
        assert "red" in body
    export = export_of(ns)
    for gone in ("secret_code", "META-ALPHA-77", "Zq0x"):
        assert gone not in export
    assert EraseAudit.objects.get(namespace=ns).key == key_digest("secret_code")
    assert api.get(base(ns) + "cells/colour/").json()["value"] == "red4"
