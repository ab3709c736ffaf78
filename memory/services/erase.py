"""Privacy erase (SPEC §6): demotion is not erasure.

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

The steps live beside this module: the key's rows and their deletion (``erase_key``), the
redaction (``erase_redact``), what is left for after the commit (``erase_followup``); their
public names are importable from here too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import OperationalError, connection, transaction

from memory.domain import normalize_key
from memory.domain.redact import Redactor
from memory.models import EraseAudit, KeyAlias, Namespace

from .changes import erase_events
from .embeddings import messages_after_commit
from .erase_followup import ERASE_TABLES, erase_followup, erase_rewrite, evidence_reembed
from .erase_key import (
    ATTACHED,
    KEY_OPS,
    DanglingReference,
    delete_key,
    find_cell,
    key_digest,
    key_rows_delete,
    lock_cell,
    name_forms,
    values_of,
)
from .erase_redact import redact_evidence

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
        cell = lock_cell(namespace, key)
        names = [cell.key, *KeyAlias.objects.filter(cell=cell).values_list("alias", flat=True)]
        values, metadata = values_of(namespace.pk, cell.pk, names)
        redactor = Redactor([*values, *name_forms(names), *metadata],
                            names=names, normalize_key=normalize_key)
        redacted, stale, sessions = redact_evidence(namespace.pk, cell.pk, names, redactor)
        n_versions = delete_key(namespace.pk, cell.pk, names)
        audit = EraseAudit.objects.create(namespace=namespace, key=key_digest(cell.key),
                                          actor=actor, versions_erased=n_versions,
                                          evidence_redacted=len(redacted))
        erase_events(namespace_id=namespace.pk, names=names, key=cell.key, actor=actor)
    # After the commit: the search reads other rows only, and must not hold the cell's lock
    # for as long as it takes to look up every value of a long history.
    mentions = _mentions(namespace.pk, cell.pk, names, values) if report else Mentions()
    left = evidence_reembed(evidence_ids=stale[:REEMBED_INLINE])
    if sessions:  # their message rows were written again without vectors (the messages'
        messages_after_commit(namespace_id=namespace.pk)  # trigger): embedded as a commit's
    return Erased(key=cell.key, audit=audit, redacted_evidence=len(redacted), mentions=mentions,
                  reembed_pending=max(0, len(stale) - REEMBED_INLINE) + left)


def erase_preview(*, namespace: Namespace, key: str) -> ErasePreview:
    """What :func:`cell_erase` would delete and redact, and where else the key's values
    appear (the same bounded, indexed search the erase reports with). Reads only: it lives
    beside the erase so that the preview and the report can never disagree."""
    cell = find_cell(namespace, key, lock=False)
    names = [cell.key, *KeyAlias.objects.filter(cell=cell).values_list("alias", flat=True)]
    values, _ = values_of(namespace.pk, cell.pk, names)
    with connection.cursor() as cur:
        cur.execute(f"SELECT (SELECT count(*) FROM memory_version WHERE cell_id = %(cell)s),"
                    f" (SELECT count(*) FROM ({KEY_OPS}) o),"
                    f" (SELECT count(*) FROM ({ATTACHED}) e)",
                    {"ns": namespace.pk, "cell": cell.pk, "names": names})
        versions, operations, evidence = cur.fetchone()
    return ErasePreview(key=cell.key, versions=versions, operations=operations,
                        evidence=evidence, mentions=_mentions(namespace.pk, cell.pk, names, values))


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
       AND e.id NOT IN ({ATTACHED})
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


__all__ = [
    "ERASE_TABLES", "MENTIONS_MAX", "REEMBED_INLINE", "DanglingReference", "ErasePreview",
    "Erased", "Mention", "Mentions", "cell_erase", "erase_followup", "erase_preview",
    "erase_rewrite", "evidence_reembed", "key_digest", "key_rows_delete", "name_forms",
]
