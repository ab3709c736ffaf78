"""The stored encoding of effects (memory.domain.effect_log): stable names, a format number, read back
in one place."""

from __future__ import annotations

import typing

from memory.domain import NEW, Effect, NewVersion, Retype, Status, Tombstone
from memory.domain.effect_log import (
    EFFECT_NAMES,
    EFFECTS_FORMAT,
    LoggedEffect,
    effects_record,
    logged_effects,
)


def test_every_effect_has_one_stored_name():
    assert set(EFFECT_NAMES) == set(typing.get_args(Effect))
    assert len(set(EFFECT_NAMES.values())) == len(EFFECT_NAMES)


def test_a_record_names_each_effect_maps_its_ids_and_carries_the_format():
    ids = {NEW: 41, 7: 7}
    record = effects_record([NewVersion("b", Status.ACTIVE, supersedes_id=7),
                             Retype(7, Status.SUPERSEDED), Tombstone(NEW)], ids.__getitem__)
    assert record == {"effects_format": EFFECTS_FORMAT, "effects": [
        {"effect": "NewVersion", "value": "b", "status": "active", "supersedes_id": 7,
         "alternative_of_id": None, "restores_id": None},
        {"effect": "Retype", "version_id": 7, "status": "superseded"},
        {"effect": "Tombstone", "version_id": 41}]}


def test_logged_effects_read_back_what_was_written_and_what_predates_the_format():
    record = effects_record([Retype(3, Status.CONTRADICTED)], lambda v: v)
    assert logged_effects(record) == [LoggedEffect("Retype", 3, "contradicted")]
    older = {"effects": [{"effect": "Retype", "version_id": 3, "status": "contradicted"}]}
    assert logged_effects(older) == logged_effects(record)
    junk = {"effects": ["x", {"version_id": 3}, {"effect": "Support", "version_id": True}]}
    assert logged_effects(junk) == [LoggedEffect("Support", None, None)]
    assert logged_effects({}) == logged_effects({"effects": "no"}) == []
