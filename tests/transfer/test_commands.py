"""``pmem_export`` / ``pmem_import`` on the command line, and ``GET .../export/`` (CONTRACT
"Export, import and backup of a namespace"), with the explorer's link to it for admins."""

from __future__ import annotations

import gzip
import io
import json

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from memory.models import ApiToken, Cell, Namespace
from memory.services import (
    membership_set,
    namespace_create,
    observation_ingest,
    operation_apply,
    token_authenticate,
    token_create,
)
from tests.support.transfer import api_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def source():
    ns = namespace_create(name="moving-ns")
    observation_ingest(namespace=ns, facts=[{"key": "city", "value": "Rome"}], source="crm")
    observation_ingest(namespace=ns, text="city: Paris")
    operation_apply(namespace=ns, key="city", op="revoke", actor="user:r", reason="wrong")
    token_create(namespace=ns, client="agent", name="the agent's")
    return ns


def records(text: str) -> list[dict]:
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines[0]["format"] == "pmem-export" and lines[0]["version"] == 1
    return lines


def test_export_writes_the_header_and_every_record_to_stdout(source):
    out = io.StringIO()
    call_command("pmem_export", source.name, stdout=out)
    lines = records(out.getvalue())
    header = lines[0]
    assert set(header) >= {"format", "version", "namespace", "exported_at", "counts"}
    assert header["namespace"] == "moving-ns"
    assert sum(header["counts"].values()) == len(lines) - 1
    assert header["counts"]["observation"] == 2 and header["counts"]["tombstone"] == 1
    assert lines[1] == {"type": "namespace", "name": "moving-ns", "next_seq": 3,
                        "created_at": lines[1]["created_at"]}


def test_no_token_session_or_password_leaves(source, tmp_path):
    User.objects.create_user("alice", password="s3cret-pass")
    membership_set(namespace=source, user=User.objects.get(username="alice"), role="admin")
    out = io.StringIO()
    call_command("pmem_export", source.name, stdout=out)
    text = out.getvalue()
    for token in ApiToken.objects.filter(namespace=source):
        assert token.digest not in text and token.prefix not in text
    assert "alice" not in text and "s3cret" not in text and "pbkdf2" not in text
    assert {r["type"] for r in records(text)[1:]} <= {
        "namespace", "trust", "observation", "cell", "alias", "version", "operation", "span",
        "support", "tombstone", "erasure"}


def test_export_to_a_gz_file_then_import_prints_the_namespace_a_token_and_counts(source,
                                                                                tmp_path):
    path = tmp_path / "moving.ndjson.gz"
    call_command("pmem_export", source.name, "--out", str(path), stderr=io.StringIO())
    assert path.read_bytes()[:2] == b"\x1f\x8b"
    assert not (tmp_path / "moving.ndjson.gz.partial").exists()
    out = io.StringIO()
    call_command("pmem_import", str(path), "--as", "moved-ns", stdout=out)
    answer = json.loads(out.getvalue())
    assert set(answer) == {"namespace", "token", "counts"}
    assert answer["namespace"] == "moved-ns"
    header = records(gzip.decompress(path.read_bytes()).decode())[0]
    assert answer["counts"] == header["counts"]
    token = token_authenticate(raw=answer["token"])
    assert token.namespace.name == "moved-ns" and token.scope == "review"
    assert ApiToken.objects.filter(namespace__name="moved-ns").count() == 1  # not the agent's
    copy = Namespace.objects.get(name="moved-ns")
    assert Cell.objects.get(namespace=copy, key="city").head.value == "Rome"


def test_import_without_as_takes_the_exported_name(source, tmp_path):
    path = tmp_path / "moving.ndjson"
    call_command("pmem_export", source.name, "--out", str(path), stderr=io.StringIO())
    source.name = "renamed-meanwhile"
    source.save()
    out = io.StringIO()
    call_command("pmem_import", str(path), stdout=out)
    assert json.loads(out.getvalue())["namespace"] == "moving-ns"


def test_a_refused_import_names_the_line_and_writes_nothing(source, tmp_path):
    path = tmp_path / "moving.ndjson"
    call_command("pmem_export", source.name, "--out", str(path), stderr=io.StringIO())
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(CommandError, match=r"refused, nothing written: line \d+: the file ends"):
        call_command("pmem_import", str(path), "--as", "half-ns")
    assert not Namespace.objects.filter(name="half-ns").exists()
    with pytest.raises(CommandError, match="exists already"):
        call_command("pmem_export", source.name, "--out", str(path), stderr=io.StringIO())
        call_command("pmem_import", str(path))


def test_an_unknown_namespace_or_file_is_an_error(tmp_path):
    with pytest.raises(CommandError, match="no namespace named"):
        call_command("pmem_export", "nowhere")
    with pytest.raises(CommandError, match="no such file"):
        call_command("pmem_import", str(tmp_path / "missing.ndjson"))


def test_the_api_streams_the_same_file_to_a_review_token(source):
    response = api_for(source).get(f"/api/v1/namespaces/{source.name}/export/")
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"] == "application/x-ndjson"
    assert 'filename="moving-ns.pmem.ndjson"' in response["Content-Disposition"]
    streamed = records(b"".join(response.streaming_content).decode())
    out = io.StringIO()
    call_command("pmem_export", source.name, stdout=out)
    written = records(out.getvalue())
    assert streamed[1:] == written[1:]
    assert {k: v for k, v in streamed[0].items() if k != "exported_at"} == \
        {k: v for k, v in written[0].items() if k != "exported_at"}
    packed = api_for(source).get(f"/api/v1/namespaces/{source.name}/export/", {"gzip": 1})
    assert packed["Content-Type"] == "application/gzip"
    assert records(gzip.decompress(b"".join(packed.streaming_content)).decode())[1:] == \
        written[1:]


@pytest.mark.parametrize("scope", ["read", "write"])
def test_the_api_export_needs_scope_review(source, scope):
    from rest_framework.test import APIClient

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION="Token " + token_create(namespace=source,
                                                               scope=scope).key)
    assert api.get(f"/api/v1/namespaces/{source.name}/export/").status_code == 403


def test_the_api_export_of_another_namespace_is_not_found(source):
    other = namespace_create(name="another-ns")
    assert api_for(other).get(f"/api/v1/namespaces/{source.name}/export/").status_code == 404
    assert api_for(source).get(f"/api/v1/namespaces/{source.name}/export/",
                               {"gzip": "yes"}).status_code == 400


@pytest.mark.parametrize(("role", "linked", "status"), [("admin", True, 200),
                                                       ("reviewer", False, 200),
                                                       ("viewer", False, 403)])
def test_the_explorer_links_admins_to_the_export_which_their_session_may_fetch(
        client, source, role, linked, status):
    user = User.objects.create_user(f"{role}-person", password="pw-for-tests-1")
    membership_set(namespace=source, user=user, role=role)
    client.force_login(user)
    page = client.get(f"/ns/{source.name}/").content.decode()
    url = f"/api/v1/namespaces/{source.name}/export/?gzip=1"
    assert (url in page) is linked
    response = client.get(url)
    assert response.status_code == status
    if status == 200:
        text = gzip.decompress(b"".join(response.streaming_content)).decode()
        assert records(text)[0]["namespace"] == source.name
