"""The messages of a chat session as passages of their own, for the evidence read (SPEC §7): one
row per message of an observation that holds ``messages`` — its number in the session, its line
(``speaker: content``, the speaker being its name, else its role), and its embedding once the
embedder has come — with the same lexical index as an observation's text (``pmem_evidence_lex``,
GIN) and a cosine index (HNSW), so that a read ranks the turn that matched, not the session.

The rows are derived from ``memory_evidence.messages`` by triggers, in the statement that writes
it: every write path (one observation, a batch, the importer's COPY) gets them in its own
transaction, so a read sees a session's turns as soon as it sees the session (SPEC §11.1), and
an erase that redacts the messages rewrites them in the same transaction (their embeddings go
with them and are computed again; SPEC §6). No foreign key: the namespace deletion's batched
DELETEs and a test database's TRUNCATE of ``memory_evidence`` take the rows along through the
triggers, without a constraint check per row. The functions' bodies name their tables by the
search_path of the migration (``SET search_path FROM CURRENT``), so a restore (an empty
search_path) can run them.
"""

from django.conf import settings
from django.db import migrations

TABLE = f"""CREATE TABLE memory_evidencemessage (
    id bigserial PRIMARY KEY,
    evidence_id bigint NOT NULL,
    namespace_id bigint NOT NULL,
    position integer NOT NULL,
    line text NOT NULL,
    embedding vector({settings.PMEM_EMBED_DIM}),
    CONSTRAINT evidencemessage_once UNIQUE (evidence_id, position))"""

# The line: as memory.domain.conversation.speaker and message_line (without the number and
# time) make it.
_ROWS = """SELECT {e}.id, {e}.namespace_id, m.n::integer,
       coalesce(nullif(m.v->>'name', ''), nullif(m.v->>'role', ''), '') || ': '
       || btrim(coalesce(m.v->>'content', ''))
  FROM jsonb_array_elements({e}.messages) WITH ORDINALITY AS m(v, n)"""

SYNC = f"""CREATE FUNCTION pmem_evidence_messages_sync() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        DELETE FROM memory_evidencemessage WHERE evidence_id = OLD.id;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') AND jsonb_typeof(NEW.messages) = 'array' THEN
        INSERT INTO memory_evidencemessage (evidence_id, namespace_id, position, line)
        {_ROWS.format(e="NEW")};
    END IF;
    RETURN NULL;
END $$"""

EMPTY = """CREATE FUNCTION pmem_evidence_messages_empty() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    TRUNCATE memory_evidencemessage;
    RETURN NULL;
END $$"""

TRIGGERS = [
    "CREATE TRIGGER evidence_messages_insert AFTER INSERT ON memory_evidence FOR EACH ROW"
    " WHEN (NEW.messages IS NOT NULL) EXECUTE FUNCTION pmem_evidence_messages_sync()",
    "CREATE TRIGGER evidence_messages_update AFTER UPDATE OF messages ON memory_evidence"
    " FOR EACH ROW WHEN (OLD.messages IS DISTINCT FROM NEW.messages)"
    " EXECUTE FUNCTION pmem_evidence_messages_sync()",
    "CREATE TRIGGER evidence_messages_delete AFTER DELETE ON memory_evidence FOR EACH ROW"
    " WHEN (OLD.messages IS NOT NULL) EXECUTE FUNCTION pmem_evidence_messages_sync()",
    "CREATE TRIGGER evidence_messages_truncate AFTER TRUNCATE ON memory_evidence"
    " FOR EACH STATEMENT EXECUTE FUNCTION pmem_evidence_messages_empty()",
    # Also where a writer turns the foreign-key triggers off (session_replication_role =
    # replica: the importer, the erase's and a namespace deletion's bulk deletes).
    *(f"ALTER TABLE memory_evidence ENABLE ALWAYS TRIGGER {name}" for name in (
        "evidence_messages_insert", "evidence_messages_update", "evidence_messages_delete",
        "evidence_messages_truncate")),
]

BACKFILL = ("INSERT INTO memory_evidencemessage (evidence_id, namespace_id, position, line) "
            + _ROWS.format(e="e").replace("FROM jsonb_array_elements",
                                          "FROM memory_evidence e, jsonb_array_elements")
            + " WHERE jsonb_typeof(e.messages) = 'array'")

INDEXES = [
    # The read's word lookups, inside a namespace through its ns:<id> lexeme.
    "CREATE INDEX evidencemessage_lexical_tsv ON memory_evidencemessage"
    " USING gin (pmem_evidence_lex(namespace_id, line)) WITH (gin_pending_list_limit = 64)",
    "CREATE INDEX evidencemessage_embedding_hnsw ON memory_evidencemessage"
    " USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)",
    # The embedder's pass: a namespace's messages without a vector yet.
    "CREATE INDEX evidencemessage_unembedded ON memory_evidencemessage (namespace_id, id)"
    " WHERE embedding IS NULL",
]


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0021_evidence_lexical'),
    ]

    operations = [
        migrations.RunSQL([TABLE, SYNC, EMPTY, *TRIGGERS, BACKFILL, *INDEXES], [
            *(f"DROP TRIGGER IF EXISTS {name} ON memory_evidence" for name in (
                "evidence_messages_insert", "evidence_messages_update",
                "evidence_messages_delete", "evidence_messages_truncate")),
            "DROP FUNCTION IF EXISTS pmem_evidence_messages_sync()",
            "DROP FUNCTION IF EXISTS pmem_evidence_messages_empty()",
            "DROP TABLE IF EXISTS memory_evidencemessage"]),
    ]
