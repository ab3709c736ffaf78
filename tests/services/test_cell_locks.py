"""How a commit finds and locks the cells its facts name (memory.services.store): one
statement for a key's own cell and the cells soft identity merged names into, the own cell
first; cells created in the same commit come back from their insert."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory.models import Cell, KeyAlias, Version
from memory.selectors.cells import cell_value
from memory.services import observation_ingest

pytestmark = pytest.mark.django_db


def test_a_fact_under_an_alias_updates_the_cell_it_was_merged_into(ns):
    observation_ingest(namespace=ns, facts=[{"key": "home_city", "value": "Paris"}])
    home = Cell.objects.get(namespace=ns, key="home_city")
    KeyAlias.objects.create(namespace=ns, cell=home, alias="city_of_residence")
    observation_ingest(namespace=ns, facts=[{"key": "city_of_residence", "value": "Lyon"}])
    assert cell_value(namespace=ns, key="home_city").value == "Lyon"
    assert not Cell.objects.filter(namespace=ns, key="city_of_residence").exists()


def test_a_key_that_is_also_anothers_alias_names_its_own_cell(ns):
    observation_ingest(namespace=ns, facts=[{"key": "city", "value": "Paris"},
                                            {"key": "town", "value": "Oslo"}])
    town = Cell.objects.get(namespace=ns, key="town")
    KeyAlias.objects.create(namespace=ns, cell=town, alias="city")  # an old merge's name
    observation_ingest(namespace=ns, facts=[{"key": "city", "value": "Rome"}])
    assert Version.objects.get(cell__key="city", status="active").value == "Rome"
    assert Version.objects.get(cell=town, status="active").value == "Oslo"


def test_named_cells_are_found_in_one_statement_and_new_ones_come_from_their_insert(ns):
    observation_ingest(namespace=ns, facts=[{"key": "a", "value": "1"}])
    KeyAlias.objects.create(namespace=ns, cell=Cell.objects.get(namespace=ns, key="a"),
                            alias="aa")
    with CaptureQueriesContext(connection) as captured:
        observation_ingest(namespace=ns, facts=[{"key": "aa", "value": "2"},
                                                {"key": "b", "value": "3"}])
    sqls = [q["sql"] for q in captured.captured_queries]
    locks = [s for s in sqls if "FOR UPDATE" in s and "memory_cell" in s]
    assert len(locks) == 1, locks  # own keys and aliases together
    assert not any("memory_keyalias" in s and "FOR UPDATE" not in s for s in sqls), sqls
    assert sum(s.startswith("INSERT INTO memory_cell") for s in sqls) == 1
    assert cell_value(namespace=ns, key="a").value == "2"
    assert cell_value(namespace=ns, key="b").value == "3"
