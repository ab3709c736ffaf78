"""The drain's extraction pool takes the most urgent call first, and which observations of a
line an update may wait for (memory.services.ingest.threads, memory.services.shown)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from memory.models import Evidence
from memory.services.ingest.threads import PriorityPool
from memory.services.shown import awaited_in, by_urgency, related_in_line


def test_the_pool_runs_the_least_urgency_first_and_ties_in_submission_order() -> None:
    pool = PriorityPool(1, "test-pool")
    gate, ran = threading.Event(), list[str]()
    blocker = pool.submit((0,), gate.wait, 10)  # holds the only thread while the rest queue
    futures = [pool.submit(urgency, ran.append, name) for urgency, name in
               [((2, 1), "c"), ((1, 9), "b"), ((2, 0), "d-before-c"), ((1, 9), "b-again")]]
    gate.set()
    for future in [blocker, *futures]:
        future.result(timeout=10)
    assert ran == ["b", "b-again", "d-before-c", "c"]


def test_a_call_cancelled_before_it_starts_never_runs_and_a_failure_reaches_its_future() -> None:
    pool = PriorityPool(1, "test-pool")
    gate, ran = threading.Event(), list[str]()
    pool.submit((0,), gate.wait, 10)
    cancelled = pool.submit((1,), ran.append, "cancelled")
    failing = pool.submit((2,), lambda: 1 / 0)
    after = pool.submit((3,), ran.append, "after")
    assert cancelled.cancel()
    gate.set()
    after.result(timeout=10)
    assert ran == ["after"]
    with pytest.raises(ZeroDivisionError):
        failing.result(timeout=10)


def _line(*texts: str, extracted: dict[int, list[str]] | None = None) -> list[Evidence]:
    line = []
    for pk, text in enumerate(texts, start=1):
        keys = (extracted or {}).get(pk)
        facts = None if keys is None else {"facts": [{"key": k, "value": "x"} for k in keys]}
        line.append(Evidence(pk=pk, text=f"They told me this.\n{text}", extracted=facts))
    return line


def test_an_id_held_by_three_of_ten_relates_them_a_plain_word_held_as_often_does_not(
        settings: Any) -> None:
    settings.PMEM_EXTRACTION_HEADS = 3
    texts = ["k3f2a9c01b7e = new a", "k01 = b", "k02 = c", "k3f2a9c01b7e = new d", "k03 = e",
             "k04 = f", "k05 = g", "k3f2a9c01b7e = new h", "k06 = i", "k07 = j"]
    related = related_in_line(_line(*texts))
    assert related[3] == [1] and related[7] == [1, 4]  # by the id, not by "new" or the preamble
    assert related[1] == related[2] == related[9] == []
    assert awaited_in(related) == {1, 4}
    assert by_urgency(_line(*texts), awaited_in(related))[:2] == [0, 3]


def test_an_extracted_earlier_observation_relates_by_the_keys_it_named(settings: Any) -> None:
    settings.PMEM_EXTRACTION_HEADS = 3
    line = _line("the item shelf moved", "order_8812_status = sent",
                 extracted={1: ["order_8812_status"]})
    assert related_in_line(line)[1] == [1]  # its text shares no id, its key does
    settings.PMEM_EXTRACTION_HEADS = 0
    assert related_in_line(line) == [[], []]  # nothing shown, nothing worth waiting for


def test_an_urgent_call_gets_a_reserved_thread_while_every_other_one_is_busy() -> None:
    pool = PriorityPool(1, "test-pool", extra=1)
    gate = threading.Event()
    pool.submit((1, 1), gate.wait, 10)  # the only ordinary thread, held
    ordinary = pool.submit((1, 2), lambda: "ordinary")
    urgent = pool.submit((0, 3), lambda: "urgent")
    assert urgent.result(timeout=10) == "urgent"  # while the ordinary thread is still held
    assert not ordinary.done()  # a reserved thread takes urgent calls only
    gate.set()
    assert ordinary.result(timeout=10) == "ordinary"
