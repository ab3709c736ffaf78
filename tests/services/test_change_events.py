"""The change feed as the write path records it (SPEC §12): one event per committed operation,
written in the commit's transaction, in commit order, with what the operation did; an erase
takes its key's events out and leaves one ``erase`` event; replaying the feed from the start
rebuilds the frontier, whatever the operations were."""

from __future__ import annotations

import itertools
import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory.domain import InvalidOperation, cell_status
from memory.domain.changes import replay
from memory.models import Cell, ChangeEvent, Version
from memory.selectors.changes import events_after
from memory.services import cell_erase, namespace_create, observation_ingest, operation_apply
from memory.services.changes import erase_keys_blank
from memory.services.expiry import expire_due

pytestmark = pytest.mark.django_db
_names = itertools.count(1)


def op(ns, key, kind, value=None, version=None):
    return operation_apply(namespace=ns, key=key, op=kind, value=value, version_id=version,
                           actor="user:test")


def feed(ns, after=None):
    return events_after(ns.pk, after, 1000)


def frontier(ns):
    """The frontier as the database holds it: each key with a head -> (value, cell status)."""
    return {c.key: (c.head.value, str(cell_status(c.head.status)))
            for c in Cell.objects.filter(namespace=ns, head__isnull=False).select_related("head")}


def test_each_operation_is_an_event_with_what_it_did_in_commit_order(ns):
    op(ns, "city", "accept", "Lisbon")
    op(ns, "city", "accept", "Porto")
    op(ns, "city", "revoke")
    events = feed(ns)
    assert [e["cursor"] for e in events] == [1, 2, 3, 4]
    assert [e["op"] for e in events] == ["accept", "accept", "revoke", "reinstate"]
    lisbon, porto = (Version.objects.get(namespace=ns, value=v) for v in ("Lisbon", "Porto"))
    first, second, revoke, reinstate = events
    assert first["previous"] is None and first["status"] == "active"
    assert (second["version"], second["ordinal"], second["value"]) == (porto.pk, 2, "Porto")
    assert second["previous"] == {"version": lisbon.pk, "ordinal": 1, "value": "Lisbon"}
    assert (revoke["version"], revoke["status"]) == (porto.pk, "revoked")
    assert revoke["previous"] == {"version": porto.pk, "ordinal": 2, "value": "Porto"}
    assert (reinstate["version"], reinstate["status"], reinstate["method"]) == \
        (lisbon.pk, "active", "reinstate")
    assert reinstate["head"] == {"version": lisbon.pk, "ordinal": 1, "value": "Lisbon"}
    assert all(e["actor"] == "user:test" and e["cell_status"] == "active" for e in events)


def test_an_observations_events_name_it_and_its_source(ns):
    observation_ingest(namespace=ns, facts=[{"key": "a", "value": "1"}, {"key": "b", "value": "2"}],
                       source="crm", actor="api:t")
    events = feed(ns)
    assert [(e["key"], e["value"], e["source"]) for e in events] == [("a", "1", "crm"),
                                                                    ("b", "2", "crm")]
    assert events[0]["observation"] is not None
    assert events[0]["observation"] == events[1]["observation"]


def test_a_refused_operation_is_an_event_too_and_changes_nothing(ns):
    observation_ingest(namespace=ns, facts=[{"key": "k", "op": "revoke"}], actor="api:t")
    [event] = feed(ns)
    assert event["op"] == "noop" and event["reason"].startswith("invalid")
    assert event["head"] is None and replay([event]) == {}


def test_a_rolled_back_transaction_leaves_no_event_and_no_gap(ns):
    op(ns, "k", "accept", "a")
    with pytest.raises(RuntimeError), transaction.atomic():
        op(ns, "k", "accept", "b")
        raise RuntimeError("roll back")
    op(ns, "k", "accept", "c")
    assert [(e["cursor"], e["value"]) for e in feed(ns)] == [(1, "a"), (2, "c")]


def test_expiry_is_an_event_that_empties_the_cell(ns):
    op(ns, "k", "accept", "a")
    Version.objects.filter(namespace=ns).update(expires_at=timezone.now())
    expire_due(namespace_id=ns.pk)
    last = feed(ns)[-1]
    assert (last["op"], last["status"], last["cell_status"], last["actor"]) == \
        ("expire", "expired", "empty", "system:expiry")
    assert last["previous"]["value"] == "a" and last["head"] is None


def test_erase_takes_the_keys_events_out_and_leaves_one_erase_event(ns):
    op(ns, "secret", "accept", "s1")
    op(ns, "secret", "accept", "s2")
    op(ns, "other", "accept", "o")
    cell_erase(namespace=ns, key="secret", actor="user:test")
    events = feed(ns)
    assert [(e["op"], e["key"]) for e in events] == [("accept", "other"), ("erase", "secret")]
    assert events[-1]["cursor"] == 4  # cursors are never reused
    assert not any("s1" in str(e) or "s2" in str(e) for e in events)
    assert replay(events) == {"other": ("o", "active")}


def test_the_erase_event_loses_its_key_after_the_retention(ns, settings):
    settings.PMEM_CHANGES_ERASE_RETENTION = 3600
    op(ns, "secret", "accept", "s1")
    cell_erase(namespace=ns, key="secret", actor="user:test")
    assert erase_keys_blank() == 0  # within the retention: still named
    assert erase_keys_blank(timezone.now() + timedelta(hours=2)) == 1
    [event] = feed(ns)
    assert event["op"] == "erase" and event["key"] == ""


def test_deleting_a_namespace_drops_its_events(ns):
    from memory.services.namespace_delete import namespace_delete

    op(ns, "k", "accept", "a")
    namespace_delete(namespace=ns, actor="user:test")
    assert not ChangeEvent.objects.filter(namespace_id=ns.pk).exists()


# --- replay: the feed rebuilds the frontier ---------------------------------------------------

KEYS = ("k1", "k2")
VALUES = ("a", "b", "c")
steps = st.lists(st.tuples(
    st.sampled_from(("accept", "accept", "update", "contest", "revoke", "reject",
                     "reject_value", "resolve", "restore", "expire", "noop")),
    st.sampled_from(KEYS), st.sampled_from(VALUES), st.booleans()), min_size=1, max_size=14)


def _step(ns, kind, key, value, through_observation):
    if kind == "expire":
        Version.objects.filter(namespace=ns, cell__key=key, status__in=("active", "contested",
                                                                          "alternative")) \
            .update(expires_at=timezone.now())
        expire_due(namespace_id=ns.pk)
        return
    versions = list(Version.objects.filter(namespace=ns, cell__key=key).order_by("id"))
    if kind == "resolve":
        candidates = [v for v in versions if v.status in ("contested", "alternative")]
        target = candidates[-1].pk if candidates else None
        args = ("resolve", None, target)
    elif kind == "restore":
        closed = [v for v in versions if v.status in ("revoked", "contradicted")]
        args = ("restore", None, closed[0].pk if closed else None)
    elif kind in ("revoke", "reject"):
        args = (kind, None, None)
    elif kind == "reject_value":
        args = ("reject", value, None)
    else:
        args = ({"update": "accept"}.get(kind, kind), value, None)
    if through_observation and kind not in ("resolve", "restore"):
        fact = {"key": key, "op": args[0], **({"value": args[1]} if args[1] else {})}
        observation_ingest(namespace=ns, facts=[fact], actor="api:prop")
        return
    try:
        op(ns, key, *args)
    except InvalidOperation:
        pass  # refused before anything was written


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(plan=steps)
def test_replaying_the_feed_from_the_start_rebuilds_the_frontier(plan):
    ns = namespace_create(name=f"replay-{next(_names)}")
    for kind, key, value, through_observation in plan:
        _step(ns, kind, key, value, through_observation)
        assert replay(feed(ns)) == frontier(ns)
    cursors = [e["cursor"] for e in feed(ns)]
    assert cursors == list(range(1, len(cursors) + 1))


# --- commit order under concurrent writers ------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_cursor_order_is_commit_order_and_no_cursor_appears_after_a_later_one_was_seen():
    ns = namespace_create(name=f"order-{next(_names)}")
    writers, per_writer = 4, 8
    seen: list[list[int]] = []
    done = threading.Event()
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            for i in range(per_writer):
                # Keys shared between writers, so commits contend for the same cells too.
                operation_apply(namespace=ns, key=f"k{(n + i) % 3}", op="accept",
                                value=f"w{n}-{i}", actor=f"user:w{n}")
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            errors.append(exc)
        finally:
            connection.close()

    def read() -> None:
        try:
            while not done.is_set():
                seen.append([e["cursor"] for e in events_after(ns.pk, None, 1000)])
        finally:
            connection.close()

    reader = threading.Thread(target=read)
    reader.start()
    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    reader.join()
    assert not errors
    total = writers * per_writer
    final = [e["cursor"] for e in events_after(ns.pk, None, 1000)]
    assert final == list(range(1, total + 1))
    # Every read saw a prefix of the final feed: no cursor was ever missing below one seen.
    assert all(s == final[:len(s)] for s in seen)
    # Cursor order is commit order: each event's operation was committed after the one
    # before it (operation ids come from a sequence, in allocation order, so they may not be;
    # the commit time taken in the transaction under the lock is).
    ats = [e["committed_at"] for e in events_after(ns.pk, None, 1000)]
    assert ats == sorted(ats)
    assert replay(events_after(ns.pk, None, 1000)) == frontier(ns)
