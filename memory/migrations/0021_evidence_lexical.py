"""The evidence read's lexical index (SPEC §7): the words of an observation's text as the
``english`` text search configuration makes them (stemmed, its stop words dropped), plus one
lexeme ``ns:<id>`` that keeps a lookup inside its namespace, behind a GIN index.

An index over an expression of ``text`` (no stored column): an erase redacts the text, and the
index entry follows from the redacted text as every other index does (SPEC §6), and adding it
does not rewrite the table. ``english`` rather than ``simple`` (the erase's mention index,
migration 0008): on LoCoMo the stemming and the stop words lift the evidence read's turn recall
at 5 by several points (bench/README.md, "Evidence retrieval"). The function's body calls
pg_catalog functions only, so a restore (an empty search_path) can evaluate the index. The
GIN pending list is kept small as in migration 0008: every read looks up each of its words.
"""

import importlib

from django.db import migrations

_erase = importlib.import_module("memory.migrations.0008_erase_redaction")

FUNCTION = f"""CREATE FUNCTION pmem_evidence_lex(ns bigint, t text) RETURNS tsvector
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT to_tsvector('pg_catalog.english'::regconfig, {_erase.FOLD.format(x="t")})
                 || array_to_tsvector(ARRAY['ns:' || ns::text]) $$"""
COMMENT = ("COMMENT ON FUNCTION pmem_evidence_lex(bigint, text) IS 'P-Mem: the lexemes the"
           " evidence read ranks an observation''s text by, and its namespace''s'")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ('memory', '0020_namespace_ends'),
    ]

    operations = [
        migrations.RunSQL([FUNCTION, COMMENT],
                          ["DROP FUNCTION IF EXISTS pmem_evidence_lex(bigint, text)"]),
        migrations.RunSQL(
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS evidence_lexical_tsv ON memory_evidence"
            " USING gin (pmem_evidence_lex(namespace_id, text)) WITH (gin_pending_list_limit = 64)",
            "DROP INDEX CONCURRENTLY IF EXISTS evidence_lexical_tsv"),
    ]
