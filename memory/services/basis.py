"""What a plan made ahead of its turn read, and whether it still holds (SPEC §5.5).

Planning may run ahead of the commit, in parallel, against the state it saw. A plan records
its :class:`Basis` — every cell it read (its head, the head's status and alternatives), every
version a withdrawal named, and for each new key soft identity looked at, the registered key
it was compared with — and the commit checks it under the namespace's drain lock: when
anything differs, the observation is planned again, so the result is the one planning it in
``seq`` order would give. A cell that earlier observations' plans (not committed yet) move is
read as they leave it and compared by content — its head's value, status and alternatives —
which is all planning reads of it (only a cell named once, and not by a withdrawal, is read
so: ``planning.plan_with_model``). The heads extraction is shown (:func:`candidate_heads`) live here
too: what the model proposes is a patch on them, valid while they stand.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connection

from memory.domain import HeadView, Status, normalize_key, same_value
from memory.domain.keyrule import same_by_rule
from memory.domain.ranking import query_terms
from memory.llm.embedding import identity_threshold
from memory.models import Namespace

from .lexical import cells_sharing_words
from .overlay import Overlay, snapshot_overlay

#: What a plan saw of one name: (cell id, head id, HeadView) or None when no cell bore it.
Seen = tuple[int, int | None, HeadView] | None

#: Of a new key's registered neighbours above the gate: the one soft identity asks the model
#: about, and the nearest one the deterministic pre-check told apart without it.
Nearest = tuple[str | None, str | None]

#: Words of an observation looked up for the heads shown to extraction (the rarest matter
#: most, but a handful of words already finds the keys a short observation names).
_MAX_WORDS = 32


@dataclass
class Basis:
    """What one plan read. ``heads``: by every name it looked up (a fact's key as written,
    and the key identity moved it to). ``ahead``: instead, for a name whose cell earlier
    observations not committed yet will change, what their plans leave of it (compared by
    content: the versions they will write have no ids yet). ``withdrawn``: the version each withdrawn value
    named, by (key, value). ``nearest``: for each new key soft identity looked at, the
    registered key close enough to ask about and the one the deterministic pre-check told
    apart (:func:`nearest_keys`), and the key's vector."""

    heads: dict[str, Seen] = field(default_factory=dict)
    ahead: dict[str, HeadView] = field(default_factory=dict)
    withdrawn: dict[tuple[str, str], int | None] = field(default_factory=dict)
    nearest: dict[str, tuple[Nearest, list[float]]] = field(default_factory=dict)


def seen(overlay: Overlay, name: str) -> Seen:
    cell = overlay.cells.get(name)
    if cell is None:
        return None
    view = overlay.head_views([name]).get(name) or HeadView(cell.key, None, None, ())
    return cell.pk, overlay.heads.get(cell.pk), view


def read_basis(overlay: Overlay, names: Sequence[str],
               withdrawn: Sequence[tuple[str, str]], basis: Basis,
               ahead: frozenset[str] = frozenset()) -> None:
    """Record what planning is about to read on ``overlay`` (before any dry run moves it);
    ``ahead``: the names whose cells earlier observations' plans have already moved."""
    for name in names:
        now = seen(overlay, name)
        if name in ahead and now is not None:
            basis.ahead[name] = now[2]
        else:
            basis.heads[name] = now
    for key, value in withdrawn:
        basis.withdrawn[(key, value)] = overlay.withdrawn_target(key, value)


def basis_holds(namespace: Namespace, basis: Basis) -> bool:
    """Does the graph still show what the plan read? Read without a lock: the caller holds
    the namespace's drain lock, which keeps every other commit out."""
    names = sorted({*basis.heads, *basis.ahead})
    overlay = snapshot_overlay(namespace, names)
    if any(seen(overlay, name) != was for name, was in basis.heads.items()):
        return False
    for name, view in basis.ahead.items():
        found = seen(overlay, name)
        if found is None or found[2] != view:
            return False
    if any(overlay.withdrawn_target(key, value) != target
           for (key, value), target in basis.withdrawn.items()):
        return False
    if basis.nearest:
        keys = list(basis.nearest)
        now = nearest_keys(namespace.pk, [basis.nearest[k][1] for k in keys], keys)
        if any(now[i] != basis.nearest[k][0] for i, k in enumerate(keys)):
            return False
    return True


_NEAREST_SQL = """
SELECT u.i, c.key, c.key_embedding <=> u.v
  FROM unnest(%(vectors)s::vector[]) WITH ORDINALITY AS u(v, i)
  CROSS JOIN LATERAL (SELECT id, key, key_embedding FROM memory_cell
                       WHERE namespace_id = %(ns)s AND key_embedding IS NOT NULL
                       ORDER BY key_embedding <=> u.v, id LIMIT %(k)s) AS c
 ORDER BY u.i, c.key_embedding <=> u.v, c.id
"""

#: Registered keys above the gate looked at per new key: those the rule tells apart are
#: passed over for the next (a new ``mug_9_location`` among ``mug_1…8_location`` asks
#: nothing), within a bounded read.
_NEAREST_LOOKED = 8


def nearest_keys(namespace_id: int, vectors: Sequence[Sequence[float]],
                 names: Sequence[str]) -> list[Nearest]:
    """For each vector (of the new key ``names[i]``), in ONE query: the nearest registered
    key whose cosine similarity reaches the gate (:func:`identity_threshold`) and that the
    deterministic pre-check leaves to the model (soft identity asks about that pair), and
    the nearest one above the gate that the pre-check told apart without it (SPEC §5.3,
    docs/identity.md). ``(None, None)``: no key is near enough."""
    if not vectors:
        return []
    literals = ["[" + ",".join(f"{float(x):.7g}" for x in v) + "]" for v in vectors]
    found: list[Nearest] = [(None, None)] * len(vectors)
    threshold = identity_threshold()
    with connection.cursor() as cur:
        cur.execute(_NEAREST_SQL, {"vectors": literals, "ns": namespace_id,
                                   "k": _NEAREST_LOOKED})
        for i, key, distance in cur.fetchall():
            index = int(i) - 1
            asked, ruled = found[index]
            if asked is not None or 1 - float(distance) < threshold:
                continue
            if same_by_rule(names[index], key) is None:
                found[index] = (key, ruled)
            elif ruled is None:
                found[index] = (None, key)
    return found


def candidate_heads(namespace: Namespace, text: str) -> list[dict[str, Any]]:
    """The heads of the keys ``text`` most likely touches — the cells sharing the most of
    its words (``PMEM_EXTRACTION_HEADS`` at most) — as extraction shows them: ``key``,
    ``value``, ``status`` and, for a contested head, ``alternatives``. Only a word held by at
    most ``lexical.PROPOSING_DF`` cells proposes a head (it still counts among the words a
    proposed cell shares), so the lookup reads a bounded number of rows however large the
    namespace and however common its words; an observation made only of common words is
    shown no heads."""
    words = query_terms(text)[:_MAX_WORDS]
    keys = cells_sharing_words(namespace_id=namespace.pk, words=words,
                               limit=int(settings.PMEM_EXTRACTION_HEADS))
    if not keys:
        return []
    return shown_heads(keys, snapshot_overlay(namespace, keys).head_views(keys))


def shown_heads(keys: Sequence[str], views: dict[str, HeadView]) -> list[dict[str, Any]]:
    """The heads of ``keys`` as extraction is shown them (a key without a value is left out)."""
    shown = []
    for key in keys:
        view = views.get(key)
        if view is None or view.value is None:
            continue
        head: dict[str, Any] = {"key": view.key, "value": view.value, "status": view.status}
        if view.status == Status.CONTESTED:
            head["alternatives"] = list(view.alternatives)
        shown.append(head)
    return shown


def proposal_stands(fact: dict[str, Any], shown: Sequence[dict[str, Any]],
                    head: HeadView | None) -> str | None:
    """The op the model proposed for ``fact`` at extraction, when the head it was shown for
    the fact's key is the key's head now (value, status, alternatives) and the proposal
    names it as the old value; else None (the fact is annotated)."""
    proposal = fact.get("proposed") or {}
    op, old = proposal.get("op"), proposal.get("old_value")
    if not op or old is None or head is None or head.value is None or fact.get("alias_of"):
        return None
    by_key = {normalize_key(str(h.get("key") or "")): h for h in shown}
    was = by_key.get(head.key)
    if was is None or (was.get("value"), was.get("status")) != (head.value, head.status):
        return None
    if tuple(was.get("alternatives") or ()) != head.alternatives:
        return None
    return str(op) if same_value(str(old), head.value) else None
