"""The evidence read (SPEC §7): the passages that best match a query — observations, and the
messages of the observations that hold a chat session — ranked by fusing their meaning (the
cosine over their embeddings, pgvector) with their words (PostgreSQL full text search over
``pmem_evidence_lex``), with both score parts returned.

A session is ranked by its messages (``memory_evidencemessage``: a row per message, written
with the session by a trigger, its own lexical and cosine indexes), so that a question finds
the turn that answers it rather than the twenty-turn transcript around it, and the item names
that turn. Candidates come from both sides: the cosine's nearest passages, and the passages
holding the most query weight among those holding a query word held by at most
:data:`PROPOSING_DF` of the namespace's passages (each word one GIN lookup per table, inside
its namespace through the ``ns:<id>`` lexeme); as many from each side (on LoCoMo, fusing every
observation ranks exactly as fusing these). A commoner word still counts towards the
candidates' scores (it is checked on them) but proposes none: its weight is small, and its
posting list could be the whole namespace. A passage the embedder has not reached yet (the
embedding comes after the commit) is found by its words at once and ranked by its lexical
score alone (memory.domain.evidence_rank).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import DatabaseError, connection, transaction

from memory.domain.conversation import MAX_MESSAGES, message_line
from memory.domain.evidence_rank import Passage, RankedPassage, rank_passages
from memory.domain.ranking import idf, lexical_score
from memory.llm.embedding import embed_texts
from memory.models import Evidence, Namespace
from memory.services.binding import vector_literal
from memory.services.embeddings import namespace_embedder_check

from .search import FRONTIER_EF_SEARCH, ReadResult, evidence_line

EVIDENCE_HEADER = "Retrieved observations (best match first):"
#: Observations a query word may be held by and still propose candidates of its own.
PROPOSING_DF = 1000
#: Observations counted for the idf's total: above it, the weights hardly move.
TOTAL_CAP = 20_000
#: Observations each side proposes, per observation asked for (at least :data:`MIN_POOL`).
POOL_PER_ITEM = 4
MIN_POOL = 40
#: Orders a session's messages after it among equals: seq * this + the message's number.
MESSAGES_CAP = MAX_MESSAGES + 1

#: The indexed lexemes of an observation ``e`` (migration 0022: folded, stemmed, stop words
#: out), and of a query.
INDEXED = "pmem_evidence_lex(e.namespace_id, e.text)"
_LEXEMES_SQL = "SELECT lexeme FROM unnest(pmem_evidence_lex(0, %s)) WHERE lexeme <> 'ns:0'"
#: Another text search configuration, for the benchmarks only: computed row by row, no index.
UNINDEXED = ("(to_tsvector('{config}'::regconfig, pmem_fold(e.text))"
             " || array_to_tsvector(ARRAY['ns:' || e.namespace_id::text]))")
_UNINDEXED_LEXEMES_SQL = ("SELECT lexeme FROM unnest(to_tsvector('{config}'::regconfig,"
                          " pmem_fold(%s)))")

#: A message's indexed lexemes (memory_evidencemessage, migration 0022), as an observation's.
MESSAGE_INDEXED = "pmem_evidence_lex(m.namespace_id, m.line)"
MESSAGE_UNINDEXED = ("(to_tsvector('{config}'::regconfig, pmem_fold(m.line))"
                     " || array_to_tsvector(ARRAY['ns:' || m.namespace_id::text]))")

# The namespace's passages (capped) — its observations other than sessions, and its sessions'
# messages — and, per word, the passages holding it (capped, each side).
_FREQUENCIES_SQL = """
SELECT (SELECT count(*) FROM (SELECT 1 FROM memory_evidence
                               WHERE namespace_id = %(ns)s AND messages IS NULL
                               LIMIT %(total_cap)s) AS n)
       + (SELECT count(*) FROM (SELECT 1 FROM memory_evidencemessage
                                 WHERE namespace_id = %(ns)s LIMIT %(total_cap)s) AS n),
       ARRAY(SELECT (SELECT count(*) FROM (
                        SELECT 1 FROM memory_evidence e
                         WHERE {lex} @@ t.q AND e.messages IS NULL{scope}
                         LIMIT %(df_cap)s) AS held)
                    + (SELECT count(*) FROM (
                        SELECT 1 FROM memory_evidencemessage m
                         WHERE {mlex} @@ t.q{mscope}
                         LIMIT %(df_cap)s) AS held)
               FROM unnest(%(queries)s::tsquery[]) WITH ORDINALITY AS t(q, n) ORDER BY t.n)
"""

# Candidate passages from both sides — an observation (position 0) or a session's message (its
# number) — each with its cosine distance (null: not embedded yet) and the summed weight of
# the query words it holds. A session is ranked by its messages, never as a whole: its whole
# transcript holds most words of any query about it. ``{as_of}`` narrows every scan to what
# was committed by T.
_SCORES_SQL = """
WITH w AS (SELECT * FROM unnest(%(queries)s::tsquery[], %(weights)s::float8[],
                                %(proposes)s::bool[]) AS w(q, weight, proposes)),
hits AS (SELECT h.id, 0 AS pos, w.weight FROM w CROSS JOIN LATERAL (
             SELECT e.id FROM memory_evidence e
              WHERE {lex} @@ w.q AND e.messages IS NULL{scope}{as_of}
              LIMIT %(df_cap)s) AS h
          WHERE w.proposes
         UNION ALL
         SELECT h.evidence_id, h.position, w.weight FROM w CROSS JOIN LATERAL (
             SELECT m.evidence_id, m.position FROM memory_evidencemessage m
              WHERE {mlex} @@ w.q{mscope}{m_as_of}
              LIMIT %(df_cap)s) AS h
          WHERE w.proposes),
sem AS (SELECT e.id, 0 AS pos FROM memory_evidence e
         WHERE e.namespace_id = %(ns)s AND e.embedding IS NOT NULL AND e.messages IS NULL{as_of}
         ORDER BY e.embedding <=> %(v)s::vector LIMIT %(pool)s),
msem AS (SELECT m.evidence_id AS id, m.position AS pos FROM memory_evidencemessage m
          WHERE m.namespace_id = %(ns)s AND m.embedding IS NOT NULL{m_as_of}
          ORDER BY m.embedding <=> %(v)s::vector LIMIT %(pool)s),
lex AS (SELECT id, pos, sum(weight) AS matched FROM hits GROUP BY id, pos
         ORDER BY matched DESC, id DESC, pos LIMIT %(pool)s),
cand AS (SELECT id, pos FROM lex UNION SELECT id, pos FROM sem UNION SELECT id, pos FROM msem),
docs AS MATERIALIZED (
    SELECT e.id, cand.pos, e.seq,
           CASE WHEN cand.pos = 0 THEN e.embedding ELSE m.embedding END <=> %(v)s::vector AS d,
           CASE WHEN NOT %(recheck)s THEN NULL WHEN cand.pos = 0 THEN {lex}
                ELSE {mlex} END AS tsv
      FROM cand JOIN memory_evidence e ON e.id = cand.id
      LEFT JOIN memory_evidencemessage m ON m.evidence_id = cand.id AND m.position = cand.pos)
SELECT docs.id, docs.pos, docs.seq, docs.d,
       coalesce(lex.matched, 0)
       + coalesce((SELECT sum(w.weight) FROM w WHERE NOT w.proposes AND docs.tsv @@ w.q), 0)
  FROM docs LEFT JOIN lex ON lex.id = docs.id AND lex.pos = docs.pos
"""
#: What narrows a message's scans to what was committed by T (its session's commit).
_MESSAGE_AS_OF = (" AND EXISTS (SELECT 1 FROM memory_evidence c WHERE c.id = m.evidence_id"
                  " AND c.committed_at <= %(t)s)")


def _search_settings() -> None:
    """As the raw read's: a wider HNSW candidate list, and iterative scans where pgvector has
    them (0.8+), so that the namespace's filter cannot starve the cosine's pool."""
    with connection.cursor() as cur:
        cur.execute(f"SET LOCAL hnsw.ef_search = {FRONTIER_EF_SEARCH}")
        try:
            with transaction.atomic():
                cur.execute("SET LOCAL hnsw.iterative_scan = 'relaxed_order'")
        except DatabaseError:
            pass  # older pgvector: a plain post-filtered scan


def _tsquery(namespace_id: int, lexeme: str) -> str:
    """A tsquery's text for one lexeme inside a namespace (quotes doubled, backslashes
    escaped: tsquery's own quoting)."""
    quoted = lexeme.replace("\\", "\\\\").replace("'", "''")
    return f"'ns:{namespace_id}' & '{quoted}'"


@dataclass(frozen=True)
class Candidate:
    """A passage the evidence read ranks: an observation (``position`` 0) or message
    ``position`` of a session (numbered as in its transcript), with its score parts."""

    evidence_id: int
    position: int
    seq: int
    semantic: float | None
    lexical: float

    @property
    def key(self) -> tuple[int, int]:
        return (self.evidence_id, self.position)


def evidence_candidates(*, namespace: Namespace, query: str, k: int,
                        as_of: datetime | None = None, config: str = "") -> list[Candidate]:
    """Every candidate passage of the evidence read for ``query``: the cosine's nearest and
    those the query's words propose, among the observations and the sessions' messages.
    ``config``: another text search configuration than the index's (benchmarks: no index,
    each passage's lexemes computed as it is read)."""
    # Not query_vector: it first embeds the namespace's pending cells, which this read never
    # ranks; its own unembedded passages rank by their words instead.
    namespace_embedder_check(namespace)
    vector = vector_literal(embed_texts([query])[0])
    if config and not config.isidentifier():
        raise ValueError(f"not a text search configuration: {config!r}")
    lex = UNINDEXED.format(config=config) if config else INDEXED
    mlex = MESSAGE_UNINDEXED.format(config=config) if config else MESSAGE_INDEXED
    # The tsquery's ns:<id> lexeme keeps an indexed lookup in the namespace; a row-by-row
    # one reads the namespace's rows only.
    scope = " AND e.namespace_id = %(ns)s" if config else ""
    mscope = " AND m.namespace_id = %(ns)s" if config else ""
    with connection.cursor() as cur:
        cur.execute(_UNINDEXED_LEXEMES_SQL.format(config=config) if config else _LEXEMES_SQL,
                    [query])
        lexemes = [row[0] for row in cur.fetchall()]
        queries = [_tsquery(namespace.pk, lexeme) for lexeme in lexemes]
        df: list[int] = []
        total = 0
        if queries:
            cur.execute(_FREQUENCIES_SQL.format(lex=lex, scope=scope, mlex=mlex, mscope=mscope),
                        {"ns": namespace.pk, "total_cap": TOTAL_CAP,
                         "df_cap": PROPOSING_DF + 1, "queries": queries})
            total, counts = cur.fetchone()
            df = [int(c) for c in counts]
    held = [(q, n) for q, n in zip(queries, df, strict=True) if n > 0]
    weights = [idf(n, int(total)) for _, n in held]
    proposes = [n <= PROPOSING_DF for _, n in held]
    whole = {str(i): w for i, w in enumerate(weights)}
    params: dict[str, Any] = {
        "queries": [q for q, _ in held], "weights": weights, "proposes": proposes,
        "recheck": not all(proposes), "ns": namespace.pk, "v": vector,
        "df_cap": PROPOSING_DF, "pool": max(MIN_POOL, POOL_PER_ITEM * k), "t": as_of}
    sql = _SCORES_SQL.format(
        lex=lex, mlex=mlex, scope=scope, mscope=mscope,
        as_of="" if as_of is None else " AND e.committed_at <= %(t)s",
        m_as_of="" if as_of is None else _MESSAGE_AS_OF)
    with transaction.atomic():
        _search_settings()
        with connection.cursor() as cur:
            cur.execute(sql, params)
            rows = cur.fetchall()
    return [Candidate(int(i), int(pos), int(seq), None if d is None else 1 - float(d),
                      lexical_score(float(m), whole)) for i, pos, seq, d, m in rows]


def evidence_read(*, namespace: Namespace, query: str, k: int = 10,
                  as_of: datetime | None = None) -> ReadResult:
    """The top-k passages by the fused score (SPEC §7) — observations, and the messages of
    chat sessions — as items best first, one per observation: its ``score`` (the fused one),
    ``semantic_score`` (the cosine; null for one not embedded yet) and ``lexical_score`` (0 to
    1) are its best passage's. A session's item names the messages among the top k
    (``messages``, in the session's order, each with its score parts) and its ``text`` is
    their transcript lines, not the whole session. As of T: what was committed by T."""
    rows = evidence_candidates(namespace=namespace, query=query, k=k, as_of=as_of)
    ranked = rank_passages((Passage(c.key, c.semantic, c.lexical) for c in rows), k,
                           order={c.key: c.seq * MESSAGES_CAP + c.position for c in rows})
    hits: dict[int, list[RankedPassage]] = {}
    for r in ranked:
        hits.setdefault(r.key[0], []).append(r)  # type: ignore[index]
    found = Evidence.objects.only(
        "id", "seq", "text", "source", "observed_at", "received_at").in_bulk(list(hits))
    sessions = {i for i, parts in hits.items() if parts[0].key[1]}  # type: ignore[index]
    textless = [e.pk for e in found.values() if not e.text.strip()] + list(sessions)
    if textless:  # read these only where needed: a line is the text, else the facts
        for pk, facts, messages in Evidence.objects.filter(pk__in=textless).values_list(
                "id", "facts", "messages"):
            found[pk].facts, found[pk].messages = facts, messages
    items: list[dict[str, Any]] = []
    for pk, parts in hits.items():
        e, best = found[pk], parts[0]
        item = {"id": e.id, "seq": e.seq, "text": evidence_line(e),
                "score": round(best.score, 4),
                "semantic_score": _rounded(best.semantic),
                "lexical_score": round(best.lexical, 4), "source": e.source,
                "observed_at": e.observed_at, "received_at": e.received_at}
        if pk in sessions:
            named = message_hits(e.messages or [], parts)
            item["messages"] = named
            item["text"] = "\n".join(m["line"] for m in named)
        items.append(item)
    context = "\n".join([EVIDENCE_HEADER, *(str(i["text"]) for i in items)])
    return ReadResult("evidence", context, items, len(context),
                      note=f"as of {as_of.isoformat()}" if as_of is not None else "")


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def message_hits(messages: list[dict[str, Any]],
                 parts: list[RankedPassage]) -> list[dict[str, Any]]:
    """The messages of a session that ``parts`` (its ranked passages) name, in the session's
    order: each its number, role, name and time where given, content, transcript line and
    score parts. A number past the stored messages (a session rewritten meanwhile) is
    skipped."""
    out = []
    for part in sorted(parts, key=lambda p: p.key[1]):  # type: ignore[index]
        number = int(part.key[1])  # type: ignore[index]
        if not 0 < number <= len(messages):
            continue
        message = messages[number - 1]
        out.append({"index": number, "role": str(message.get("role") or ""),
                    **{f: message[f] for f in ("name", "at") if message.get(f)},
                    "content": str(message.get("content") or ""),
                    "line": message_line(message, number),
                    "score": round(part.score, 4), "semantic_score": _rounded(part.semantic),
                    "lexical_score": round(part.lexical, 4)})
    return out
