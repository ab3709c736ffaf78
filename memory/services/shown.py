"""What extraction is shown of the keys an observation touches when earlier observations that
name them are planned but not committed yet (SPEC §5.5; decision "Heads planned ahead").

Planning ahead may plan an observation on the plans of earlier ones not committed yet. The
heads extraction is shown (:func:`memory.services.basis.candidate_heads`) were read from the
committed state: when an earlier observation in the drain's window names the key an update
names, and has not committed, extraction saw no head (or an old one), the model's proposal
could not stand and the update cost an annotation call. So the drain holds back extracting an
observation whose text shares a distinctive word with an earlier one in its window
(:func:`related_earlier`) until that one is extracted, and extraction is then shown the heads
as its plan leaves them, or, while it is not planned, as its facts read as accepted leave them
(:func:`as_accepted`, :func:`heads_shown`): the proposal is made on the head its plan will
most likely read, and stands only while that head does (``basis.proposal_stands``; the commit
checks the basis as always). Waiting for the plan itself would wait for every observation
before that one to be extracted, and the line commits in seq order behind the update.
Extracted away from its drain (:func:`elsewhere`), it is shown the earlier ones' facts as if
accepted, or left to its drain while one of them is not extracted.

Also here: plans a drain finished after it stopped, kept for the next drain of the process.
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from django.conf import settings

from memory.domain import SYSTEM_ACTOR, UNSETTLED_STATES, OpInput, OpType, normalize_key
from memory.domain.ranking import query_terms
from memory.domain.render import key_text
from memory.models import Evidence, Namespace

from .basis import candidate_heads, shown_heads
from .planning import Ahead, overlay_ahead

if TYPE_CHECKING:
    from .ingest.plan import Prepared


def _words(evidence: Evidence) -> frozenset[str]:
    """The words an observation may name its keys with: its text's and its client facts'."""
    keys = " ".join(key_text(str(f.get("key") or "")) for f in (evidence.facts or []))
    return _terms(f"{evidence.text}\n{keys}")


@lru_cache(maxsize=4096)
def _terms(text: str) -> frozenset[str]:
    # The drain asks again for the same window's texts each time it tops the window up.
    return frozenset(query_terms(text))


def _key_words(evidence: Evidence) -> set[str] | None:
    """The words of the keys an extracted observation names (None: not extracted yet)."""
    if evidence.extracted is None:
        return None
    facts = evidence.extracted.get("facts") or []
    return set(_terms(" ".join(key_text(normalize_key(str(f.get("key") or "")))
                               for f in facts)))


def related_earlier(line: Sequence[Evidence], index: int) -> list[int]:
    """The observations before ``line[index]`` in the window that may name one of its keys:
    an extracted one whose keys hold a distinctive word of its text, one not extracted yet
    whose text does. A distinctive word is held by at most a quarter of the window's
    observations (or two): a line or a word many observations repeat names no key. None of them when extraction
    is shown no heads (``PMEM_EXTRACTION_HEADS=0``): then nothing is gained by waiting."""
    if index == 0 or int(settings.PMEM_EXTRACTION_HEADS) <= 0:
        return []
    words = [_words(e) for e in line]
    df = Counter(w for ws in words for w in ws)
    most = max(2, len(line) // 4)
    mine = {w for w in words[index] if df[w] <= most}
    related = []
    for j in range(index):
        named = _key_words(line[j])
        if mine & (words[j] if named is None else named):
            related.append(line[j].pk)
    return related


def elsewhere(evidence_id: int, width: int) -> list[Ahead] | None:
    """What extracting this observation away from its namespace's drain shows of the keys
    the ``width - 1`` unsettled observations before it may name: each related one's asserted
    facts, read as accepted (a guess — its plan decides, and the proposal stands only if the
    guess was its head). None while a related one is not extracted yet: its drain will see
    to it."""
    evidence = Evidence.objects.defer("embedding").filter(pk=evidence_id).first()
    if evidence is None or evidence.extracted is not None:
        return []
    earlier = list(Evidence.objects.defer("embedding").filter(
        namespace_id=evidence.namespace_id, seq__lt=evidence.seq,
        state__in=UNSETTLED_STATES).order_by("-seq")[:max(0, width - 1)])
    line = [*reversed(earlier), evidence]
    related = [e for e in line if e.pk in set(related_earlier(line, len(line) - 1))]
    if any(e.extracted is None for e in related):
        return None
    return [as_accepted(e) for e in related]


def as_accepted(evidence: Evidence) -> Ahead:
    """An extracted observation's asserted facts, each read as accepted: a guess at what its
    plan will make of their keys, for extraction to be shown before that plan is made."""
    return (evidence, [(OpInput(key=normalize_key(str(f["key"])), op=OpType.ACCEPT,
                                value=str(f["value"])), SYSTEM_ACTOR)
                       for f in (evidence.extracted or {}).get("facts") or []
                       if f.get("value") is not None and not f.get("op")
                       and (f.get("assertion") or "asserted") == "asserted"
                       and normalize_key(str(f.get("key") or ""))])


def heads_shown(namespace: Namespace, text: str, ahead: Sequence[Ahead]) -> list[dict[str, Any]]:
    """:func:`candidate_heads`, with the keys the ``ahead`` plans write that share a word with
    ``text`` first, each as those plans leave it."""
    if not ahead:
        return candidate_heads(namespace, text)
    words = set(query_terms(text))
    pending = list(dict.fromkeys(
        normalize_key(item.key) for _, items in ahead for item, _ in items
        if words & set(query_terms(key_text(normalize_key(item.key))))))
    shown = candidate_heads(namespace, text)
    if not pending:
        return shown
    overlay, _ = overlay_ahead(namespace, pending, ahead)
    first = shown_heads(pending, overlay.head_views(pending))
    named = {normalize_key(str(h["key"])) for h in first}
    rest = [h for h in shown if normalize_key(str(h["key"])) not in named]
    return (first + rest)[:max(len(first), int(settings.PMEM_EXTRACTION_HEADS))]


# --- plans kept across drains -------------------------------------------------------------------

#: Plans finished after the drain that asked for them stopped (its deadline, a time limit):
#: the next drain of this process takes them instead of asking the model again (the
#: basis check at the commit still decides whether they hold).
_KEEP = 256
_kept: OrderedDict[int, Prepared] = OrderedDict()
_kept_lock = threading.Lock()


def keep(evidence_id: int, done: Future[Prepared | None]) -> None:
    if done.cancelled() or done.exception() is not None:
        return
    prepared = done.result()
    if prepared is None:
        return
    with _kept_lock:
        _kept[evidence_id] = prepared
        while len(_kept) > _KEEP:
            _kept.popitem(last=False)


def from_kept(evidence_id: int) -> Future[Prepared | None] | None:
    """A plan an earlier drain of this process left, as a finished future."""
    with _kept_lock:
        prepared = _kept.pop(evidence_id, None)
    if prepared is None:
        return None
    future: Future[Prepared | None] = Future()
    future.set_result(prepared)
    return future
