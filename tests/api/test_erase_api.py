"""Privacy erase through the public API (SPEC §6, CONTRACT's DELETE row): what goes, what is
redacted on parsed structures, what is never touched, and the mentions report."""

from __future__ import annotations

import hashlib
import json

import pytest

from memory.models import Cell, EraseAudit, Evidence, Operation, Version
from memory.services import namespace_drain, observation_extract, operation_apply
from memory.services.erase import key_digest
from tests.support.erase import holds, leaks, shape, strings

pytestmark = pytest.mark.django_db

SECRET = "Zanzibar-4471"
WIDE = "Ｚａｎｚｉｂａｒ－４４７１"  # full width: the service's equality calls it the same value
SOFT = "Zan\u00adzibar-4471"  # with a soft hyphen: stored as another value, reads the same


def base(ns) -> str:
    return f"/api/v1/namespaces/{ns.name}/"


def post(api, ns, body):
    r = api.post(base(ns) + "observations/", json.dumps(body), content_type="application/json")
    assert r.status_code == 202, r.content
    return r.json()


def commit(ns) -> None:
    for pk in Evidence.objects.filter(namespace=ns, state="pending").order_by("seq") \
            .values_list("id", flat=True):
        observation_extract(evidence_id=pk)
    namespace_drain(namespace_id=ns.pk)


def texts_of(evidence: Evidence) -> list[str]:
    return [evidence.text, evidence.source, evidence.error, evidence.idempotency_key or "",
            *strings(evidence.facts), *strings(evidence.extracted)]


def erase(api, ns, key: str, report: bool = True):
    return api.delete(base(ns) + f"cells/{key}/" + ("?report=1" if report else ""))


def test_a_secret_written_three_ways_leaves_no_form_attached_to_the_key(api, ns):
    post(api, ns, {"text": f"passcode: {SECRET}", "source": f"sms {SECRET}",
                   "idempotency_key": f"req-{SECRET}"})
    post(api, ns, {"text": f"ｐａｓｓｃｏｄｅ: {WIDE}"})
    post(api, ns, {"text": f"passcode: {SOFT}", "source": "phone"})
    post(api, ns, {"text": "colour: red", "source": "cam"})
    commit(ns)
    attached = list(Evidence.objects.filter(namespace=ns, operations__key="passcode").distinct())
    assert len(attached) == 3
    unrelated = Evidence.objects.get(namespace=ns, text="colour: red")
    before = {f.name: getattr(unrelated, f.name) for f in Evidence._meta.concrete_fields}

    r = erase(api, ns, "passcode")

    assert r.status_code == 200, r.content
    assert r.json()["redacted_evidence"] == 3 and r.json()["key"] == "passcode"
    assert api.get(base(ns) + "cells/passcode/").status_code == 404
    for evidence in Evidence.objects.filter(pk__in=[e.pk for e in attached]):
        assert leaks(texts_of(evidence), [SECRET]) == [], evidence.pk
        assert evidence.facts is None or shape(evidence.facts) == shape(
            next(e for e in attached if e.pk == evidence.pk).facts)
    assert not Version.objects.filter(cell__namespace=ns, cell__key="passcode").exists()
    assert not Operation.objects.filter(namespace=ns, key="passcode").exists()
    unrelated.refresh_from_db()
    assert {f.name: getattr(unrelated, f.name) for f in Evidence._meta.concrete_fields} == before
    audit = EraseAudit.objects.get(namespace=ns)
    assert audit.key == key_digest("passcode") and audit.versions_erased == 2 and audit.evidence_redacted == 3
    assert not any(holds(str(getattr(audit, f.name)), SECRET)
                   for f in EraseAudit._meta.concrete_fields)
    # Raw reads (the explorer's read page too) show the redacted texts only.
    read = api.post(base(ns) + "read/", json.dumps({"mode": "raw", "query": SECRET, "k": 10}),
                    content_type="application/json").json()
    assert not holds(json.dumps(read, ensure_ascii=False), SECRET)


def test_a_replayed_request_after_the_erase_does_not_record_the_secret_again(api, ns):
    body = {"text": f"passcode: {SECRET}", "idempotency_key": f"req-{SECRET}"}
    first = post(api, ns, body)
    commit(ns)
    stored = Evidence.objects.get(pk=first["id"]).idempotency_key
    assert stored == hashlib.sha256(f"req-{SECRET}".encode()).hexdigest()
    assert erase(api, ns, "passcode", report=False).status_code == 204
    again = post(api, ns, body)
    assert again["replayed"] is True and again["id"] == first["id"]
    assert Evidence.objects.filter(namespace=ns).count() == 1


def test_a_json_escaped_value_is_redacted(api, ns):
    value = 'pin "8812" backslash\\x'
    post(api, ns, {"facts": [{"key": "pin", "value": value}, {"key": "door", "value": "blue"}],
                   "text": f"my pin is {value} and the door is blue"})
    commit(ns)
    evidence = Evidence.objects.get(namespace=ns)
    assert erase(api, ns, "pin").status_code == 200
    evidence.refresh_from_db()
    assert leaks(texts_of(evidence), [value]) == []
    # The key's name goes with its values (SPEC §6).
    assert evidence.text == "my [erased] is [erased] and the door is blue"
    assert [(f["key"], f["value"]) for f in evidence.facts] == [("[erased]", "[erased]"),
                                                                ("door", "blue")]


def test_erasing_the_value_value_renames_no_field_and_spares_unrelated_evidence(api, ns):
    post(api, ns, {"facts": [{"key": "word", "value": "value"}, {"key": "city",
                                                                  "value": "Paris"}]})
    post(api, ns, {"facts": [{"key": "city", "value": "Paris"}],
                   "text": "the value of rent is high"})
    commit(ns)
    attached, unrelated = Evidence.objects.filter(namespace=ns).order_by("seq")
    before = (unrelated.text, unrelated.facts, unrelated.extracted)

    assert erase(api, ns, "word").status_code == 200

    attached.refresh_from_db()
    unrelated.refresh_from_db()
    assert (unrelated.text, unrelated.facts, unrelated.extracted) == before
    assert [(f["key"], f["value"]) for f in attached.facts] == [("[erased]", "[erased]"),
                                                                ("city", "Paris")]
    facts = attached.extracted["facts"]
    assert all(set(f) >= {"key", "value"} for f in facts)  # no field was renamed
    assert {f["key"]: f["value"] for f in facts} == {"[erased]": "[erased]", "city": "Paris"}
    assert api.get(base(ns) + "cells/city/").json()["value"] == "Paris"


def test_erasing_a_colon_space_value_works(api, ns):
    post(api, ns, {"facts": [{"key": "sep", "value": '": "'}, {"key": "x", "value": "y"}]})
    commit(ns)
    r = erase(api, ns, "sep")
    assert r.status_code == 200, r.content
    evidence = Evidence.objects.get(namespace=ns)
    assert leaks(texts_of(evidence), ['": "']) == []
    assert (evidence.facts[1]["key"], evidence.facts[1]["value"]) == ("x", "y")
    assert api.get(base(ns) + "cells/sep/").status_code == 404


def test_the_report_lists_mentions_in_another_cell_an_operation_reason_and_other_evidence(
        api, ns):
    shared = post(api, ns, {"text": f"passcode: {SECRET}\nbackup_code: {WIDE}"})["id"]
    post(api, ns, {"text": f"I wrote {SECRET.upper()} on a note"})
    post(api, ns, {"text": "colour: red"})
    commit(ns)
    operation_apply(namespace=ns, key="colour", op="contest", value="blue", actor="user:t",
                    reason=f"the code {SECRET} is wrong", explicit=True)
    note = Evidence.objects.get(namespace=ns, text__startswith="I wrote")
    reason_op = Operation.objects.get(namespace=ns, reason__startswith="the code")
    backup = Cell.objects.get(namespace=ns, key="backup_code")

    body = erase(api, ns, "passcode").json()

    assert {(m["kind"], m["id"], m.get("key")) for m in body["mentions"]} == {
        ("cell", backup.pk, "backup_code"), ("operation", reason_op.pk, "colour"),
        ("evidence", note.pk, None),
        # backup_code's own line there is what a kept fact says: never redacted, listed
        ("evidence", shared, None)}
    assert Evidence.objects.get(pk=shared).text == f"[erased]: [erased]\nbackup_code: {WIDE}"
    assert body["mentions_truncated"] is False and body["redacted_evidence"] == 1
    # Mentions are reported, never changed.
    note.refresh_from_db()
    assert note.text == f"I wrote {SECRET.upper()} on a note"
    assert api.get(base(ns) + "cells/backup_code/").json()["value"] == WIDE


def test_without_report_the_erase_answers_204_and_a_bad_report_flag_400(api, ns):
    post(api, ns, {"text": "a: 1\nb: 2"})
    commit(ns)
    r = api.delete(base(ns) + "cells/a/?report=yes")
    assert r.status_code == 400 and r.json()["field"] == "report"
    assert api.get(base(ns) + "cells/a/").status_code == 200
    assert api.delete(base(ns) + "cells/a/").status_code == 204
    assert api.delete(base(ns) + "cells/a/").status_code == 404


def test_the_erase_queues_its_followup_after_commit(api, ns, django_capture_on_commit_callbacks):
    from celery.signals import before_task_publish

    published: list[str] = []

    def record(sender: str | None = None, **_: object) -> None:
        published.append(str(sender))

    post(api, ns, {"text": "a: 1"})
    commit(ns)
    before_task_publish.connect(record, weak=False)
    try:
        with django_capture_on_commit_callbacks() as callbacks:
            assert erase(api, ns, "a", report=False).status_code == 204
        assert "memory.tasks.finish_erasures" not in published  # nothing before the commit
        for callback in callbacks:
            callback()
    finally:
        before_task_publish.disconnect(record)
    assert published.count("memory.tasks.finish_erasures") == 1
