"""Privacy erase (SPEC §6): demotion is not erasure.

(Over 450 lines on purpose: the erase's steps below share their SQL fragments — the evidence
attached to the key, ``_ATTACHED``, is what is redacted, deleted around and left out of the
mentions — and read top to bottom as the one transaction they are.)

:func:`cell_erase` runs ONE transaction holding the cell's row lock:

1. the key's values: every value of its versions and of its operations (refused ones included);
2. the evidence attached to the key, found through its support edges and its operations (never
   a scan of the namespace), locked and redacted on parsed structures — text, facts, extraction
   JSON and model output, ``source``, error — by :class:`memory.domain.redact.Redactor`, which
   matches by the service's own value equality (and through format characters); rows whose
   text or facts changed lose their embedding (it was computed from the erased text);
3. the key hard-deleted with one statement: versions, operations (their reasons and payloads),
   tombstones, support edges, aliases, the frontier copy, the cell with its embeddings and
   derived text;
4. an :class:`EraseAudit` row without content;
5. on request, the mentions: where else in the namespace the values still appear (another
   cell's value, another operation's reason, unrelated evidence), found through the full-text
   GIN indexes of migration 0008_erase_redaction, and bounded.

Every step is a bulk statement whose cost follows the rows attached to the key, none grows with
the rest of the namespace (``tests/services/test_erase_structure.py``). After the commit a few
redacted observations are re-embedded at once; the rest, and the VACUUM that removes the dead
tuples still holding the values on disk, are left to :func:`erase_followup` (a Celery task the
caller enqueues on commit, and beat) — never inside the request.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import DatabaseError, OperationalError, connection, transaction
from django.utils import timezone

from memory.domain import normalize_key
from memory.domain.redact import Redactor
from memory.llm.embedding import embed_texts
from memory.models import EMBED_DIM, Cell, EraseAudit, Evidence, KeyAlias, Namespace

from .binding import Float4Array, bound_cursor
from .changes import erase_events
from .graph import CellNotFound
from .observations import evidence_text

log = logging.getLogger("pmem.erase")

#: The most mentions an erase reports (per kind), and how many distinct values one statement
#: of the mention search looks up (every value is searched, a batch at a time).
MENTIONS_MAX = 50
MENTION_BATCH = 200
#: One batch gives up (and says so) after this long; the whole search after MENTIONS_BUDGET_MS,
#: counting the values it did not reach (it runs after the erase committed: no lock held).
MENTIONS_TIMEOUT_MS = 2000
MENTIONS_BUDGET_MS = 5_000
#: Why a value was not looked up, as the report names it.
NO_WORD = "no_letter_or_digit"  # nothing a full-text index holds (": ")
OUT_OF_TIME = "out_of_time"  # its batch timed out, or the budget was spent before it
#: Redacted observations re-embedded right after the commit; the rest by erase_followup.
REEMBED_INLINE = 32
REEMBED_BATCH = 256
#: The tables whose dead tuples hold erased bytes until vacuumed (TOAST goes with them).
ERASE_TABLES = ("memory_version", "memory_cell", "memory_evidence", "memory_operation",
                "memory_keyalias", "memory_supportedge", "memory_tombstone",
                "memory_frontiervector", "memory_changeevent")
_VACUUM_LOCK = (0x504D, 0x4552)  # "PM", "ER": one follow-up at a time


@dataclass(frozen=True)
class Mention:
    """Where an erased value still appears: a cell (its key), an operation (id, its key) or
    an observation (evidence id)."""

    kind: str  # cell | operation | evidence
    id: int
    key: str | None = None

    def as_dict(self) -> dict[str, Any]:
        row: dict[str, Any] = {"kind": self.kind, "id": self.id}
        if self.key is not None:
            row["key"] = self.key
        return row


@dataclass(frozen=True)
class Mentions:
    items: tuple[Mention, ...] = ()
    truncated: bool = False  # more than MENTIONS_MAX of some kind, or the search timed out
    #: distinct values not looked up, by reason (NO_WORD, OUT_OF_TIME); absent reasons: none
    unsearched: tuple[tuple[str, int], ...] = ()

    @property
    def values_unsearched(self) -> int:
        return sum(n for _, n in self.unsearched)


@dataclass(frozen=True)
class Erased:
    """What an erase did. ``reembed_pending`` observations wait for :func:`erase_followup`.
    ``key`` is the name the caller erased (the audit keeps only its digest)."""

    key: str
    audit: EraseAudit
    redacted_evidence: int
    mentions: Mentions
    reembed_pending: int

    def report(self) -> dict[str, Any]:
        """The answer of ``DELETE …?report=1`` (CONTRACT)."""
        return {"key": self.key, "redacted_evidence": self.redacted_evidence,
                "versions_erased": self.audit.versions_erased,
                "mentions": [m.as_dict() for m in self.mentions.items],
                "mentions_truncated": self.mentions.truncated,
                "values_unsearched": self.mentions.values_unsearched,
                "values_unsearched_by_reason": dict(self.mentions.unsearched)}


@dataclass(frozen=True)
class ErasePreview:
    """What erasing a key would do, for the explorer's confirmation page (read only)."""

    key: str
    versions: int
    operations: int
    evidence: int
    mentions: Mentions


# --- the erase ---------------------------------------------------------------------------------


def cell_erase(*, namespace: Namespace, key: str, actor: str, report: bool = False) -> Erased:
    """Erase ``key`` (or the cell an alias names) from ``namespace`` for good; raises
    :class:`CellNotFound`. Locks the cell row, then the attached evidence rows in id order.
    With ``report`` the answer lists the remaining mentions of the erased values, searched
    once the erase has committed. The caller
    schedules :func:`erase_followup` after the commit (``memory.tasks.enqueue_erase_followup``)."""
    with transaction.atomic():
        cell = _lock_cell(namespace, key)
        names = [cell.key, *KeyAlias.objects.filter(cell=cell).values_list("alias", flat=True)]
        values, metadata = _values_of(namespace.pk, cell.pk, names)
        redactor = Redactor([*values, *name_forms(names), *metadata],
                            names=names, normalize_key=normalize_key)
        redacted, stale = _redact_evidence(namespace.pk, cell.pk, names, redactor)
        n_versions = _delete_key(namespace.pk, cell.pk, names)
        audit = EraseAudit.objects.create(namespace=namespace, key=key_digest(cell.key),
                                          actor=actor, versions_erased=n_versions,
                                          evidence_redacted=len(redacted))
        erase_events(namespace_id=namespace.pk, names=names, key=cell.key, actor=actor)
    # After the commit: the search reads other rows only, and must not hold the cell's lock
    # for as long as it takes to look up every value of a long history.
    mentions = _mentions(namespace.pk, cell.pk, names, values) if report else Mentions()
    left = evidence_reembed(evidence_ids=stale[:REEMBED_INLINE])
    return Erased(key=cell.key, audit=audit, redacted_evidence=len(redacted), mentions=mentions,
                  reembed_pending=max(0, len(stale) - REEMBED_INLINE) + left)


def erase_preview(*, namespace: Namespace, key: str) -> ErasePreview:
    """What :func:`cell_erase` would delete and redact, and where else the key's values
    appear (the same bounded, indexed search the erase reports with). Reads only: it lives
    beside the erase so that the preview and the report can never disagree."""
    cell = _find_cell(namespace, key, lock=False)
    names = [cell.key, *KeyAlias.objects.filter(cell=cell).values_list("alias", flat=True)]
    values, _ = _values_of(namespace.pk, cell.pk, names)
    with connection.cursor() as cur:
        cur.execute(f"SELECT (SELECT count(*) FROM memory_version WHERE cell_id = %(cell)s),"
                    f" (SELECT count(*) FROM ({_KEY_OPS}) o),"
                    f" (SELECT count(*) FROM ({_ATTACHED}) e)",
                    {"ns": namespace.pk, "cell": cell.pk, "names": names})
        versions, operations, evidence = cur.fetchone()
    return ErasePreview(key=cell.key, versions=versions, operations=operations,
                        evidence=evidence, mentions=_mentions(namespace.pk, cell.pk, names, values))


def _find_cell(namespace: Namespace, key: str, *, lock: bool) -> Cell:
    norm = normalize_key(key)
    cells = Cell.objects.select_for_update() if lock else Cell.objects.all()
    cell = cells.filter(namespace=namespace, key=norm).only("id", "key").first()
    if cell is None:
        alias = KeyAlias.objects.filter(namespace=namespace, alias=norm).first()
        if alias is None:
            raise CellNotFound(norm)
        cell = cells.only("id", "key").get(pk=alias.cell_id)
    return cell


def _lock_cell(namespace: Namespace, key: str) -> Cell:
    return _find_cell(namespace, key, lock=True)


#: The key's operations: its cell's, and those refused before it had a cell (cell NULL, the
#: key or an alias by name; op_key_idx).
_KEY_OPS = ("SELECT id, evidence_id, value FROM memory_operation WHERE cell_id = %(cell)s"
            " UNION ALL SELECT id, evidence_id, value FROM memory_operation"
            " WHERE namespace_id = %(ns)s AND key = ANY(%(names)s) AND cell_id IS NULL")
#: Evidence attached to the key: it supports one of its versions or produced one of its
#: operations (support_evidence_idx is not needed: edges are found from the versions).
_ATTACHED = ("SELECT s.evidence_id AS id FROM memory_supportedge s"
             " JOIN memory_version v ON v.id = s.version_id"
             " WHERE v.cell_id = %(cell)s AND s.evidence_id IS NOT NULL"
             f" UNION SELECT evidence_id FROM ({_KEY_OPS}) k WHERE evidence_id IS NOT NULL")


def _values_of(namespace_id: int, cell_id: int, names: list[str]) -> tuple[list[str], list[str]]:
    """Every value the key held or was given, newest first: its versions' values and every
    value its operations carried (a refused one's too: an operation may name a version and
    carry another value); and, apart, every other string its versions' metadata held, which
    goes with them. (Metadata numbers and booleans go with the facts that carry them; in text
    they are not looked for.)"""
    with connection.cursor() as cur:
        cur.execute("SELECT value, bool_and(meta) FROM ("
                    " SELECT value, id AS at, false AS meta FROM memory_version"
                    " WHERE cell_id = %(cell)s"
                    f" UNION ALL SELECT value, 0, false FROM ({_KEY_OPS}) k"
                    " WHERE value IS NOT NULL"
                    " UNION ALL SELECT m.value #>> '{}', 0, true FROM memory_version v"
                    " CROSS JOIN LATERAL jsonb_each(CASE WHEN jsonb_typeof(v.metadata) ="
                    " 'object' THEN v.metadata ELSE '{}'::jsonb END) m"
                    " WHERE v.cell_id = %(cell)s AND jsonb_typeof(m.value) = 'string'"
                    ") v GROUP BY value ORDER BY max(at) DESC",
                    {"ns": namespace_id, "cell": cell_id, "names": names})
        rows = cur.fetchall()
    return ([v for v, meta in rows if not meta],
            [v for v, meta in rows if meta and v.strip()])


def key_digest(key: str) -> str:
    """What the audit keeps of an erased key: its SHA-256, never the name (SPEC §6)."""
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def name_forms(names: Sequence[str]) -> list[str]:
    """The key's names as the redaction looks for them: canonical (``secret_code``) and as
    words (``secret code``, which folds equal to ``Secret Code``)."""
    return sorted({form for n in names for form in (n, n.replace("_", " ").strip())
                   if form})


# --- redaction ---------------------------------------------------------------------------------


def _redact_evidence(namespace_id: int, cell_id: int, names: list[str],
                     redactor: Redactor) -> tuple[list[int], list[int]]:
    """Redact the attached evidence; returns (ids changed, ids whose embedding went stale)."""
    with connection.cursor() as cur:
        cur.execute("SELECT e.id, e.text, e.facts, e.extracted, e.source, e.error,"
                    " e.messages"
                    f" FROM memory_evidence e WHERE e.id IN ({_ATTACHED})"
                    " ORDER BY e.id FOR UPDATE OF e",
                    {"ns": namespace_id, "cell": cell_id, "names": names})
        rows = cur.fetchall()
    if not redactor:
        return [], []
    changed: list[tuple[Any, ...]] = []
    for pk, text, facts, extracted, source, error, messages in rows:
        new = _redacted_row(redactor, text, _loads(facts), _loads(extracted), source, error)
        old_messages = _loads(messages)
        new_messages = redactor.data(old_messages)  # a session's turns, as its text is
        if new is None and new_messages is not old_messages:
            new = (text, _dumps(_loads(facts)), _dumps(_loads(extracted)), source, error, False)
        if new is not None:
            changed.append((pk, *new[:-1], _dumps(new_messages), new[-1]))
    _write_redacted(changed)
    return [c[0] for c in changed], [c[0] for c in changed if c[-1]]


def _loads(raw: Any) -> Any:
    return json.loads(raw) if isinstance(raw, str | bytes) else raw


def _redacted_row(redactor: Redactor, text: str, facts: Any, extracted: Any, source: str,
                  error: str) -> tuple[Any, ...] | None:
    """The redacted columns, or None when nothing held an erased value. The last item says
    whether the embedded text (text, else facts) changed. What the observation's kept facts
    say (their keys and values) is never redacted, in the text or anywhere else in the row."""
    ex_facts = extracted.get("facts") if isinstance(extracted, dict) else None
    keep = redactor.kept(facts, ex_facts)
    new_text = redactor.text(text, keep=keep)
    new_facts = redactor.facts(facts, keep)
    new_extracted = extracted
    if isinstance(extracted, dict):
        # The vectors cache is keyed by "key: value" strings; it is only a cache: drop it.
        new_extracted = {k: redactor.facts(v, keep) if k == "facts" else redactor.data(v, keep)
                         for k, v in extracted.items() if k != "vectors"}
        if len(new_extracted) == len(extracted) and all(
                new_extracted[k] is v for k, v in extracted.items()):
            new_extracted = extracted
    elif extracted is not None:
        new_extracted = redactor.data(extracted, keep)
    new_source = redactor.text(source, max_length=Evidence._meta.get_field("source").max_length)
    new_error = redactor.text(error, keep=keep)
    if (new_text is text and new_facts is facts and new_extracted is extracted
            and new_source is source and new_error is error):
        return None
    return (new_text, _dumps(new_facts), _dumps(new_extracted), new_source, new_error,
            new_text is not text or new_facts is not facts)


def _dumps(data: Any) -> str | None:
    return None if data is None else json.dumps(data, ensure_ascii=False)


def _write_redacted(rows: list[tuple[Any, ...]]) -> None:
    """ONE UPDATE for every redacted row, its columns as arrays bound in binary."""
    if not rows:
        return
    cols = list(zip(*rows, strict=True))
    with bound_cursor() as cur:
        cur.execute(
            "UPDATE memory_evidence AS e SET text = r.text, facts = r.facts::jsonb,"
            " extracted = r.extracted::jsonb, source = r.source, error = r.error,"
            " messages = r.messages::jsonb,"
            " embedding = CASE WHEN r.stale THEN NULL ELSE e.embedding END,"
            # a digest of the request as sent would still answer "was it this value?"
            " request_digest = NULL"
            " FROM unnest(%b::bigint[], %b::text[], %b::text[], %b::text[], %b::text[],"
            " %b::text[], %b::text[], %b::bool[])"
            " AS r(id, text, facts, extracted, source, error, messages, stale)"
            " WHERE e.id = r.id",
            [list(c) for c in cols])


# --- deletion ----------------------------------------------------------------------------------

#: Everything of the key in ONE statement (its foreign keys are deferred, so the order of the
#: deletes does not matter), which answers the number of versions and whether anything OUTSIDE
#: the key points at a deleted row. Nothing does by construction (a key's versions, operations,
#: edges and tombstones only point at each other); it is checked because the delete may run
#: without the row-by-row foreign-key triggers (_without_fk_triggers). The check sees the rows
#: as they were before the statement, so the key's own rows are told apart by their cell.
_DELETE_KEY = """
WITH versions AS (DELETE FROM memory_version WHERE cell_id = %(cell)s RETURNING id),
ops AS (DELETE FROM memory_operation WHERE cell_id = %(cell)s OR (namespace_id = %(ns)s
        AND key = ANY(%(names)s) AND cell_id IS NULL) RETURNING id),
edges AS (DELETE FROM memory_supportedge s USING versions v WHERE s.version_id = v.id),
spans AS (DELETE FROM memory_versionspan WHERE cell_id = %(cell)s),  -- span_cell_idx
tombs AS (DELETE FROM memory_tombstone t USING versions v WHERE t.version_id = v.id),
aliases AS (DELETE FROM memory_keyalias WHERE cell_id = %(cell)s),
copy AS (DELETE FROM memory_frontiervector WHERE cell_id = %(cell)s),
cell AS (DELETE FROM memory_cell WHERE id = %(cell)s)
SELECT (SELECT count(*) FROM versions),
  EXISTS (SELECT 1 FROM versions d JOIN memory_version x ON x.supersedes_id = d.id
           WHERE x.cell_id <> %(cell)s)
  OR EXISTS (SELECT 1 FROM versions d JOIN memory_version x ON x.alternative_of_id = d.id
              WHERE x.cell_id <> %(cell)s)
  OR EXISTS (SELECT 1 FROM ops d JOIN memory_version x ON x.created_by_id = d.id
              WHERE x.cell_id <> %(cell)s)
  OR EXISTS (SELECT 1 FROM versions d JOIN memory_operation o ON o.version_id = d.id
              WHERE o.cell_id IS DISTINCT FROM %(cell)s
                AND NOT (o.cell_id IS NULL AND o.key = ANY(%(names)s)))
  OR EXISTS (SELECT 1 FROM ops d JOIN memory_supportedge s ON s.operation_id = d.id
              JOIN memory_version v ON v.id = s.version_id WHERE v.cell_id <> %(cell)s)
  OR EXISTS (SELECT 1 FROM ops d JOIN memory_tombstone t ON t.operation_id = d.id
              JOIN memory_version v ON v.id = t.version_id WHERE v.cell_id <> %(cell)s)
  OR EXISTS (SELECT 1 FROM versions d JOIN memory_cell c ON c.head_id = d.id
              WHERE c.id <> %(cell)s)"""


class DanglingReference(Exception):
    """Something outside the key pointed into it: the erase is rolled back."""


def _delete_key(namespace_id: int, cell_id: int, names: list[str]) -> int:
    """Hard-delete the key's rows; returns the number of versions.

    PostgreSQL checks a deferred foreign key with one or two queries per deleted row at
    commit: 30 s for a key of 100,000 versions. When the database role may set
    ``session_replication_role`` (a superuser, as the embedded server's, or a role granted
    ``SET`` on it), the delete runs without those triggers and checks itself, through the
    foreign-key indexes, that nothing outside the key points at what it deleted; otherwise
    the triggers check (docs/decisions.md, "Privacy erase")."""
    with connection.cursor() as cur:
        bypass = _without_fk_triggers(cur)
        cur.execute(_DELETE_KEY, {"ns": namespace_id, "cell": cell_id, "names": names})
        versions, dangling = cur.fetchone()
        if bypass:
            cur.execute("SET LOCAL session_replication_role = origin")
    if dangling:
        raise DanglingReference(f"rows outside cell {cell_id} point into it")
    return int(versions)


def key_rows_delete(*, namespace_id: int, cell_id: int) -> int:
    """The erase's deletion step alone (step 3): every row of the key, inside the caller's
    transaction, for a caller that deletes every observation of the namespace too — a
    namespace's delete (memory.services.namespace_delete) — so there is nothing to redact.
    Returns the number of versions."""
    names = [*Cell.objects.filter(pk=cell_id).values_list("key", flat=True),
             *KeyAlias.objects.filter(cell_id=cell_id).values_list("alias", flat=True)]
    return _delete_key(namespace_id, cell_id, names)


def _without_fk_triggers(cur: Any) -> bool:
    """Turn the foreign-key triggers off for the rest of the transaction, if allowed."""
    try:
        with transaction.atomic():  # a savepoint: a refusal must not abort the erase
            cur.execute("SET LOCAL session_replication_role = replica")
    except DatabaseError:
        return False
    return True


# --- mentions ----------------------------------------------------------------------------------

#: The values to look for, folded as the indexes fold (pmem_fold), each as the phrase of its
#: lexemes and the namespace's lexeme. A value without any lexeme (punctuation only) cannot be
#: looked up: it is counted as unsearched.
_NEEDLES = """
folded AS (SELECT DISTINCT pmem_fold(v) AS needle FROM unnest(%(values)s::text[]) AS v),
needles AS (SELECT needle, phraseto_tsquery('simple'::regconfig, needle) && %(nsq)s::tsquery AS q
              FROM folded WHERE numnode(phraseto_tsquery('simple'::regconfig, needle)) > 0)"""

#: What of an observation the index holds (pmem_evidence_tsv), folded.
_EVIDENCE_FOLDED = "pmem_fold(e.text || E'\\n' || e.source)"
#: One lookup per value (a value's own rare lexemes let GIN skip the common ones; an OR of all
#: values would walk every posting list they share), each bounded by LIMIT; a candidate is a
#: mention if its folded text holds the folded value. The namespace is in each tsquery (its
#: lexeme), so its column is compared as ``namespace_id + 0``: an expression no b-tree serves,
#: which keeps the planner on the GIN index even with stale statistics (after a bulk load it
#: would otherwise walk the namespace's rows by (namespace, seq), folding each one's text).
_MENTIONS_SQL = f"""
WITH {_NEEDLES},
cells AS (
  SELECT DISTINCT m.cell_id FROM needles n CROSS JOIN LATERAL (
    SELECT v.cell_id FROM memory_version v
     WHERE pmem_tsv(v.namespace_id, v.value) @@ n.q AND v.namespace_id + 0 = %(ns)s
       AND v.cell_id <> %(cell)s AND strpos(pmem_fold(v.value), n.needle) > 0
     LIMIT %(limit)s) m),
ops AS (
  SELECT DISTINCT m.id, m.key FROM needles n CROSS JOIN LATERAL (
    SELECT o.id, o.key FROM memory_operation o
     WHERE pmem_tsv(o.namespace_id, o.reason) @@ n.q AND o.reason <> ''
       AND o.namespace_id + 0 = %(ns)s AND o.cell_id IS DISTINCT FROM %(cell)s
       AND NOT (o.cell_id IS NULL AND o.key = ANY(%(names)s))
       AND strpos(pmem_fold(o.reason), n.needle) > 0
     LIMIT %(limit)s) m),
docs AS (
  SELECT DISTINCT m.id FROM needles n CROSS JOIN LATERAL (
    SELECT e.id FROM memory_evidence e
     WHERE pmem_evidence_tsv(e.namespace_id, e.text, e.source) @@ n.q
       AND e.namespace_id + 0 = %(ns)s AND strpos({_EVIDENCE_FOLDED}, n.needle) > 0
       AND e.id NOT IN ({_ATTACHED})
     LIMIT %(limit)s) m)
(SELECT 'cell', c.id, c.key FROM cells JOIN memory_cell c ON c.id = cells.cell_id
  ORDER BY c.key LIMIT %(limit)s)
UNION ALL (SELECT 'operation', id, key FROM ops ORDER BY id DESC LIMIT %(limit)s)
UNION ALL (SELECT 'evidence', id, NULL FROM docs ORDER BY id DESC LIMIT %(limit)s)
UNION ALL SELECT 'unsearched', count(*), NULL FROM folded
 WHERE needle <> '' AND needle NOT IN (SELECT needle FROM needles)
"""


def _mentions(namespace_id: int, cell_id: int, names: list[str],
              values: Sequence[str]) -> Mentions:
    """Where else in the namespace the values appear: at most MENTIONS_MAX per kind, looking
    up every value, newest first, MENTION_BATCH values per statement. Every lookup goes
    through a GIN index (the value's lexemes as a phrase, and the namespace's lexeme), then
    checks that the folded text holds the folded value. Bounded: a batch stops after
    MENTIONS_TIMEOUT_MS, the search after MENTIONS_BUDGET_MS; the values it did not reach are
    counted, with the reason, never silently dropped."""
    found: dict[str, dict[int, Mention]] = {"cell": {}, "operation": {}, "evidence": {}}
    unsearched = {NO_WORD: 0, OUT_OF_TIME: 0}
    timed_out = False
    deadline = time.monotonic() + MENTIONS_BUDGET_MS / 1000
    # A transaction of its own for the preview (the erase's otherwise, without a savepoint):
    # the timeout it sets holds for the batches, then goes back to the default.
    with transaction.atomic(savepoint=False):
        with connection.cursor() as cur:  # each statement below stops after the timeout
            cur.execute("SELECT set_config('statement_timeout', %s, true)",
                        [f"{MENTIONS_TIMEOUT_MS}ms"])
        for start in range(0, len(values), MENTION_BATCH):
            batch = list(values[start:start + MENTION_BATCH])
            if time.monotonic() >= deadline:
                unsearched[OUT_OF_TIME] += len(values) - start
                timed_out = True
                break
            rows = _mention_batch(namespace_id, cell_id, names, batch)
            if rows is None:
                unsearched[OUT_OF_TIME] += len(batch)
                timed_out = True
                continue
            for kind, pk, key in rows:
                if kind == "unsearched":
                    unsearched[NO_WORD] += int(pk)
                else:
                    found[kind].setdefault(pk, Mention(kind, pk, key))
        with connection.cursor() as cur:
            cur.execute("SET LOCAL statement_timeout = DEFAULT")
    ordered = {"cell": sorted(found["cell"].values(), key=lambda m: m.key or ""),
               "operation": sorted(found["operation"].values(), key=lambda m: -m.id),
               "evidence": sorted(found["evidence"].values(), key=lambda m: -m.id)}
    truncated = timed_out or any(len(kind) > MENTIONS_MAX for kind in ordered.values())
    items = tuple(m for kind in ordered.values() for m in kind[:MENTIONS_MAX])
    return Mentions(items=items, truncated=truncated,
                    unsearched=tuple((why, n) for why, n in unsearched.items() if n))


def _mention_batch(namespace_id: int, cell_id: int, names: list[str],
                   values: list[str]) -> list[tuple[str, int, str | None]] | None:
    """One statement of the mention search (in a savepoint, under the statement timeout the
    caller set); None when it ran out of time."""
    params: dict[str, Any] = {"ns": namespace_id, "cell": cell_id, "names": names,
                              "values": values, "limit": MENTIONS_MAX + 1,
                              "nsq": f"'ns:{int(namespace_id)}'"}
    try:
        with transaction.atomic(), connection.cursor() as cur:  # a savepoint: see below
            cur.execute(_MENTIONS_SQL, params)
            rows = cur.fetchall()
    except OperationalError as exc:
        # A pathological set of values (only words every row shares) must not hold the
        # cell lock: the report says the list is incomplete, the erase itself stands.
        if getattr(exc.__cause__, "sqlstate", None) != "57014":  # query_canceled
            raise
        log.warning("a mention search batch of cell %s stopped after %d ms", cell_id,
                    MENTIONS_TIMEOUT_MS)
        return None
    return rows


# --- after the commit --------------------------------------------------------------------------


def evidence_reembed(*, evidence_ids: Sequence[int]) -> int:
    """Embed redacted observations again (outside any transaction: the embedder may be a
    remote call). Only rows still without an embedding are written, so a concurrent run
    does nothing twice. Returns how many are left without one (the embedder failed)."""
    if not evidence_ids:
        return 0
    rows = list(Evidence.objects.filter(pk__in=list(evidence_ids), embedding__isnull=True)
                .only("id", "text", "facts"))
    if not rows:
        return 0
    try:
        vectors = embed_texts([evidence_text(e) for e in rows])
    except Exception:  # noqa: BLE001 — left for erase_followup; the row is just not retrieved
        log.warning("re-embedding %d redacted observations failed", len(rows), exc_info=True)
        return len(rows)
    # Only where the text is still the one embedded: a second erase may have redacted the
    # row again meanwhile (then the next run embeds the newer text).
    with bound_cursor() as cur:
        cur.execute(
            "UPDATE memory_evidence AS e SET embedding ="
            " (%b::float4[])[(r.n - 1) * %b + 1 : r.n * %b]::vector"
            " FROM unnest(%b::bigint[], %b::text[], %b::text[]) WITH ORDINALITY"
            " AS r(id, text, facts, n)"
            " WHERE e.id = r.id AND e.embedding IS NULL AND e.text = r.text"
            " AND e.facts IS NOT DISTINCT FROM r.facts::jsonb",
            [Float4Array(vectors, EMBED_DIM), EMBED_DIM, EMBED_DIM, [e.pk for e in rows],
             [e.text for e in rows], [_dumps(e.facts) for e in rows]])
    return 0


def erase_followup(*, budget: int = 20 * REEMBED_BATCH) -> dict[str, int]:
    """What an erase leaves for later, run by a Celery task (enqueued on the erase's commit,
    and by beat): re-embed redacted observations still without an embedding (found through
    the partial index evidence_unembedded_idx), then VACUUM the erase tables once if an erase
    is waiting for it. One run at a time (an advisory lock); a run that finds the lock taken
    returns at once, the running one re-checks before it ends. Never inside a transaction."""
    done = {"reembedded": 0, "vacuumed": 0}
    with connection.cursor() as cur:
        cur.execute("SELECT pg_try_advisory_lock(%s, %s)", list(_VACUUM_LOCK))
        if not cur.fetchone()[0]:
            return done
    try:
        while done["reembedded"] < budget:
            ids = list(Evidence.objects.filter(embedding__isnull=True, state="committed")
                       .order_by("id").values_list("id", flat=True)[:REEMBED_BATCH])
            if not ids or evidence_reembed(evidence_ids=ids):
                break  # nothing left, or the embedder is failing: beat tries again later
            done["reembedded"] += len(ids)
        while True:  # audits written while a VACUUM ran need one more
            waiting = list(EraseAudit.objects.filter(vacuumed_at__isnull=True)
                           .values_list("id", flat=True))
            if not waiting:
                break
            if settings.PMEM_ERASE_REWRITE:
                erase_rewrite()
            else:
                _vacuum()
            EraseAudit.objects.filter(pk__in=waiting).update(vacuumed_at=timezone.now())
            done["vacuumed"] += len(waiting)
    finally:
        with connection.cursor() as cur:
            cur.execute("SELECT pg_advisory_unlock(%s, %s)", list(_VACUUM_LOCK))
    return done


def erase_rewrite(tables: Sequence[str] = ERASE_TABLES) -> list[str]:
    """Rewrite the erase tables (``VACUUM FULL``: new files, indexes rebuilt, the old files
    unlinked), so that no byte of an erased value stays in a table file's free space. One
    table at a time: each is locked (ACCESS EXCLUSIVE) only while it is rewritten, which takes
    about as long as copying it. Never inside a transaction. Returns the tables rewritten."""
    with connection.cursor() as cur:
        for table in tables:
            cur.execute(f"VACUUM (FULL, ANALYZE) {table}")
    return list(tables)


def _vacuum() -> None:
    """Dead tuples and index entries still hold erased bytes until vacuumed; a plain VACUUM
    frees their space for reuse without overwriting it (erase_rewrite does)."""
    with connection.cursor() as cur:
        cur.execute(f"VACUUM (INDEX_CLEANUP ON) {', '.join(ERASE_TABLES)}")
