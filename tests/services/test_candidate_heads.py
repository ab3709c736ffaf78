"""The heads shown to extraction (memory.services.basis.candidate_heads): found through the
observation's rare words; a word most of the namespace holds proposes none, so the lookup
fetches a bounded number of rows and statements however large the namespace."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory.models import Cell
from memory.services import observation_ingest
from memory.services.basis import candidate_heads
from memory.services.lexical import PROPOSING_DF

pytestmark = pytest.mark.django_db

#: Cells holding the common words "parcel" and "shipped": three times the proposing cap.
PARCELS = 3 * PROPOSING_DF


def _parcels(ns: Any, n: int) -> None:
    for start in range(0, n, 250):
        observation_ingest(namespace=ns, source="test", actor="api:robot", text="", facts=[
            {"key": f"parcel_{i}_status", "value": "shipped"}
            for i in range(start, min(n, start + 250))])
    observation_ingest(namespace=ns, source="test", actor="api:robot", text="", facts=[
        {"key": "giraffe_enclosure", "value": "north gate"}])


@pytest.fixture
def crowded(make_namespace: Any) -> Any:
    ns = make_namespace()
    _parcels(ns, PARCELS)
    return ns


def _cell_rows_fetched() -> int:
    """Rows of memory_cell this transaction has fetched so far (sequential and index scans)."""
    with connection.cursor() as cur:
        cur.execute("SELECT pg_stat_get_xact_tuples_returned('memory_cell'::regclass)"
                    " + pg_stat_get_xact_tuples_fetched('memory_cell'::regclass)")
        return int(cur.fetchone()[0])


def test_a_rare_word_proposes_its_cell_past_a_crowd_sharing_more_common_words(crowded):
    shown = candidate_heads(crowded, "The giraffe parcel was shipped")

    assert [h["key"] for h in shown] == ["giraffe_enclosure"]
    assert shown[0]["value"] == "north gate"


def test_the_common_words_still_rank_the_cells_rare_words_propose(crowded):
    keys = [h["key"] for h in candidate_heads(crowded, "parcel 17 shipped, parcel 402 too")]

    assert keys == ["parcel_402_status", "parcel_17_status"]  # both share 3 words: newest first


def test_an_observation_of_common_words_alone_is_shown_no_heads(crowded):
    assert candidate_heads(crowded, "every parcel shipped") == []


def test_the_lookup_fetches_a_bounded_number_of_rows_and_statements(crowded, make_namespace):
    small = make_namespace()
    _parcels(small, 10)
    text = "The giraffe parcel was shipped"
    costs = []
    for ns in (small, crowded):
        before = _cell_rows_fetched()
        with CaptureQueriesContext(connection) as statements:
            candidate_heads(ns, text)
        costs.append((len(statements.captured_queries), _cell_rows_fetched() - before))
    (small_statements, _), (crowded_statements, crowded_rows) = costs

    assert crowded_statements == small_statements
    assert Cell.objects.filter(namespace=crowded).count() > PARCELS
    # Each common word is counted up to PROPOSING_DF + 1 cells and proposes none; the rare
    # word's cell is fetched to be counted and to be ranked: the crowd is never read whole.
    assert crowded_rows <= 2 * (PROPOSING_DF + 1) + 10, crowded_rows
