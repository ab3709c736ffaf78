"""The data migration of keys in every script (0009_keys_every_script), run on data the old
normalisation wrote (ASCII only: ``電話 1`` and ``住所 1`` both stored as ``1``)."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps

from memory.models import Cell, KeyAlias, Operation
from memory.selectors.cells import cell_detail
from memory.services import observation_record

pytestmark = pytest.mark.django_db

migration = importlib.import_module("memory.migrations.0009_keys_every_script")


def _old_cell(ns, key: str, *, raw_keys: list[str] = (), text: str = "") -> Cell:
    """A cell as the old service left it: its key the old canonical form, its observations
    holding the names they used."""
    cell = Cell.objects.create(namespace=ns, key=key)
    for raw in raw_keys:
        evidence = observation_record(namespace=ns, facts=[{"key": raw, "value": "v"}]).evidence
        Operation.objects.create(namespace=ns, cell=cell, key=key, type="accept", actor="t",
                                 evidence=evidence)
    if text:
        observation_record(namespace=ns, text=text)
    return cell


def test_collided_keys_are_kept_and_listed(ns, capsys):
    _old_cell(ns, "1", raw_keys=["電話 1"], text="住所 1 = Tokyo")
    lines = migration.forwards(apps, None)
    assert lines == [f"collided: {ns.name}/1 holds the values of 住所_1, 電話_1; kept as it is "
                     "(its versions cannot be told apart)"]
    assert "collided" in capsys.readouterr().out
    assert list(Cell.objects.filter(namespace=ns).values_list("key", flat=True)) == ["1"]
    assert not KeyAlias.objects.filter(namespace=ns).exists()


def test_a_key_with_one_spelling_gets_it_as_an_alias(ns):
    cafe = _old_cell(ns, "cafe", raw_keys=["Café", "CAFÉ"])
    phone = _old_cell(ns, "2", raw_keys=["密码2"])
    _old_cell(ns, "city", raw_keys=["City"])  # ASCII: nothing to do
    lines = migration.forwards(apps, None)
    assert sorted(lines) == [f"alias café -> {ns.name}/cafe (the name its observations used)",
                             f"alias 密码2 -> {ns.name}/2 (the name its observations used)"]
    assert cell_detail(namespace=ns, key="Café").key == "cafe"  # the next "Café" reaches it
    assert cell_detail(namespace=ns, key="密码2").key == "2"
    assert {a.cell_id for a in KeyAlias.objects.filter(namespace=ns)} == {cafe.pk, phone.pk}


def test_stored_keys_are_renormalised_and_two_that_meet_are_left_apart(ns):
    renamed = _old_cell(ns, "Mixed Case", raw_keys=["Mixed Case"])
    _old_cell(ns, "Foo Bar")
    _old_cell(ns, "foo_bar")
    lines = migration.forwards(apps, None)
    assert f"renamed {ns.name}/Mixed Case -> mixed_case" in lines
    assert (f"left apart: {ns.name}/Foo Bar and {ns.name}/foo_bar now name the same key; "
            "merge them by hand") in lines
    renamed.refresh_from_db()
    assert renamed.key == "mixed_case"
    assert set(Operation.objects.filter(cell=renamed).values_list("key", flat=True)) == {
        "mixed_case"}
    assert set(Cell.objects.filter(namespace=ns).values_list("key", flat=True)) == {
        "mixed_case", "Foo Bar", "foo_bar"}


def test_data_the_new_service_wrote_is_left_alone(ns):
    from memory.services import namespace_drain

    observation_record(namespace=ns, facts=[{"key": "電話 1", "value": "+81"},
                                            {"key": "city", "value": "Paris"}])
    namespace_drain(namespace_id=ns.pk)
    before = sorted(Cell.objects.filter(namespace=ns).values_list("key", flat=True))
    assert migration.forwards(apps, None) == []
    assert sorted(Cell.objects.filter(namespace=ns).values_list("key", flat=True)) == before
