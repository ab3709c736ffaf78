"""Privacy erase (SPEC §6): hashed idempotency keys, the mention indexes, the follow-up queue.

1. Idempotency keys are stored as the hex SHA-256 of the client's key: existing ones are hashed
   in place, in one statement (PostgreSQL's own ``sha256()``, 11+; Django's ``SHA256`` function
   needs pgcrypto). Irreversible: the keys are not kept anywhere.
2. ``EraseAudit.vacuumed_at``: when the VACUUM that an erase schedules has run.
3. SQL functions and three GIN indexes through which an erase finds where else in a namespace
   its values still appear (another cell's value, another operation's reason, unrelated
   evidence) without scanning the namespace: full-text vectors (the built-in ``simple``
   configuration, no extension) of the folded text, plus one lexeme ``ns:<id>`` that keeps a
   lookup inside its namespace. A value is looked up as a phrase, then checked as a substring
   of the folded text. ``pg_trgm`` is not in the embedded PostgreSQL, and trigrams built from
   core functions cost ten times more per written row (docs/decisions.md, "Privacy erase").
4. A partial index of committed evidence without an embedding: what an erase left to re-embed.

Every function body calls pg_catalog functions only (no other ``pmem_`` function), so a restore
(pg_dump runs it with an empty search_path) can evaluate the index expressions; each is a single
expression, so the planner inlines it. The indexes are built CONCURRENTLY (writers are not
locked out while they build), so this migration is not atomic; the hashing step is one
statement, atomic by itself.
"""

from django.db import migrations, models

#: Unicode format characters (category Cf): invisible, dropped before matching.
CF_RANGES = [
    (0x00AD, 0x00AD), (0x0600, 0x0605), (0x061C, 0x061C), (0x06DD, 0x06DD), (0x070F, 0x070F),
    (0x0890, 0x0891), (0x08E2, 0x08E2), (0x180E, 0x180E), (0x200B, 0x200F), (0x202A, 0x202E),
    (0x2060, 0x2064), (0x2066, 0x206F), (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB), (0x110BD, 0x110BD),
    (0x110CD, 0x110CD), (0x13430, 0x13438), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001), (0xE0020, 0xE007F),
]

_CF_CLASS = "[" + "".join(chr(a) if a == b else f"{chr(a)}-{chr(b)}" for a, b in CF_RANGES) + "]"
# NFKC, format characters dropped, whitespace runs as one space, lower case, trimmed. (A regex
# class: translate() with the 163 characters cost 70 us per call.)
FOLD = ("btrim(lower(regexp_replace(regexp_replace(normalize({x}, NFKC), '" + _CF_CLASS
        + r"', '', 'g'), '\s+', ' ', 'g')), ' ')")
_NS_LEXEME = "array_to_tsvector(ARRAY['ns:' || ns::text])"
#: What an observation offers to the index: its text and source. (Its facts' values are
#: versions, indexed there; a JSON path per written row would double the cost.)
_EVIDENCE_TEXT = "t || E'\\n' || src"

FUNCTIONS = [
    f"""CREATE FUNCTION pmem_fold(t text) RETURNS text
        LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
        AS $$ SELECT {FOLD.format(x="t")} $$""",
    f"""CREATE FUNCTION pmem_tsv(ns bigint, t text) RETURNS tsvector
        LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
        AS $$ SELECT to_tsvector('simple'::regconfig, {FOLD.format(x="t")}) || {_NS_LEXEME} $$""",
    f"""CREATE FUNCTION pmem_evidence_tsv(ns bigint, t text, src text)
        RETURNS tsvector LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
        AS $$ SELECT to_tsvector('simple'::regconfig, {FOLD.format(x=_EVIDENCE_TEXT)})
                     || {_NS_LEXEME} $$""",
    "COMMENT ON FUNCTION pmem_fold(text) IS 'P-Mem: the matching form of a text (NFKC, no"
    " format characters, whitespace runs as one space, lower case, trimmed)'",
    "COMMENT ON FUNCTION pmem_tsv(bigint, text) IS 'P-Mem: the folded text''s lexemes and its"
    " namespace''s (an erase looks values up through them)'",
    "COMMENT ON FUNCTION pmem_evidence_tsv(bigint, text, text) IS 'P-Mem: the lexemes of an"
    " observation''s text and source, and its namespace''s'",
]
DROP_FUNCTIONS = [f"DROP FUNCTION IF EXISTS {f}" for f in (
"pmem_evidence_tsv(bigint, text, text)",
    "pmem_tsv(bigint, text)", "pmem_fold(text)")]

#: A GIN index's pending list (fastupdate) is read whole by every lookup; an erase looks up
#: each of its values, so the list is kept small (64 kB instead of 4 MB): writes still go in
#: batches, and a lookup reads at most eight unsorted pages.
_GIN_WITH = "WITH (gin_pending_list_limit = 64)"
INDEXES = [
    ("version_value_tsv",
     f"ON memory_version USING gin (pmem_tsv(namespace_id, value)) {_GIN_WITH}"),
    ("op_reason_tsv",
     f"ON memory_operation USING gin (pmem_tsv(namespace_id, reason)) {_GIN_WITH}"
     " WHERE reason <> ''"),
    ("evidence_text_tsv",
     f"ON memory_evidence USING gin (pmem_evidence_tsv(namespace_id, text, source)) {_GIN_WITH}"),
    ("evidence_unembedded_idx",
     "ON memory_evidence (id) WHERE embedding IS NULL AND state = 'committed'"),
]

HASH_KEYS = """
UPDATE memory_evidence SET idempotency_key = encode(sha256(convert_to(idempotency_key, 'UTF8')),
                                                    'hex')
 WHERE idempotency_key IS NOT NULL
"""


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ('memory', '0007_token_hashes'),
    ]

    operations = [
        migrations.RunSQL(HASH_KEYS, migrations.RunSQL.noop),
        migrations.AddField(
            model_name='eraseaudit',
            name='vacuumed_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunSQL(FUNCTIONS, DROP_FUNCTIONS),
        *[migrations.RunSQL(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} {body}",
                            f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
          for name, body in INDEXES],
    ]
