"""The export format covers the database: every table of the app is exported or named as never
exported (with why), and every column of an exported table is in the file or computed by the
importer. A table or column added without deciding fails here, not silently in a move."""

from __future__ import annotations

from django.apps import apps

from memory.services.transfer.schema import COMPUTED, NEVER, RECORDS


def test_every_table_is_exported_or_declared_never_exported():
    tables = {m._meta.db_table for m in apps.get_app_config("memory").get_models()}
    exported = {r.table for r in RECORDS}
    assert tables - exported - set(NEVER) == set(), "decide: export it, or add it to NEVER"
    assert exported & set(NEVER) == set()


def test_every_column_of_an_exported_table_travels_or_is_computed():
    models = {m._meta.db_table: m for m in apps.get_app_config("memory").get_models()}
    for record in RECORDS:
        columns = {f.column for f in models[record.table]._meta.concrete_fields}
        carried = {f.db_column for f in record.fields if f.db_column} | (
            {"id"} if record.has_id else set())
        computed = set(COMPUTED.get(record.table, ()))
        assert carried <= columns, f"{record.type}: fields naming no column of {record.table}"
        assert columns - carried - computed == set(), (
            f"{record.table}: columns neither exported nor computed on import")
