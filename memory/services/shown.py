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


@lru_cache(maxsize=512)
def _terms(text: str) -> frozenset[str]:
    # The drain asks again for the same window's texts each time it tops the window up (a
    # process drains at most 1 + PMEM_MODEL_CONCURRENCY windows of 32 at once); the bound
    # keeps what long texts the cache holds to a few tens of megabytes.
    return frozenset(query_terms(text))


def _key_words(evidence: Evidence) -> set[str] | None:
    """The words of the keys an extracted observation names (None: not extracted yet)."""
    if evidence.extracted is None:
        return None
    facts = evidence.extracted.get("facts") or []
    return set(_terms(" ".join(key_text(normalize_key(str(f.get("key") or "")))
                               for f in facts)))


def related_earlier(line: Sequence[Evidence], index: int) -> list[int]:
    """The observations before ``line[index]`` in the window that may name one of its keys
    (:func:`related_in_line`)."""
    if index == 0:
        return []
    return related_in_line(line[:index + 1])[index]


def related_in_line(line: Sequence[Evidence]) -> list[list[int]]:
    """For each observation of the window, the ones before it that may name one of its keys:
    an extracted one whose keys hold a distinctive word of its text, one not extracted yet
    whose text does. A word is distinctive when at most a quarter of the window's
    observations (or two) hold it: a line or a word many observations repeat names no key.
    A word with a digit in it (an id, a number) may be held by half of them (or three), as
    long as not every one holds it: a key set once and updated again and again. None of
    them when extraction is shown no heads (``PMEM_EXTRACTION_HEADS=0``): then nothing is
    gained by waiting."""
    if int(settings.PMEM_EXTRACTION_HEADS) <= 0:
        return [[] for _ in line]
    words = [_words(e) for e in line]
    df = Counter(w for ws in words for w in ws)
    most, most_of_ids = max(2, len(line) // 4), max(3, len(line) // 2)

    def distinctive(word: str) -> bool:
        held = df[word]
        return held <= most or (held <= most_of_ids and held < len(line)
                                and any(c.isdigit() for c in word))

    named = [_key_words(e) for e in line]
    related: list[list[int]] = []
    for index, ws in enumerate(words):
        mine = {w for w in ws if distinctive(w)}
        related.append([line[j].pk for j in range(index)
                        if mine & (words[j] if (theirs := named[j]) is None else theirs)])
    return related


def awaited_in(related: list[list[int]]) -> set[int]:
    """The observations of a line some later one of it waits for (:func:`related_in_line`)."""
    return {pk for earlier in related for pk in earlier}


def by_urgency(line: Sequence[Evidence], awaited: set[int]) -> list[int]:
    """The indexes of a line in the order their extractions are started: first the
    ``awaited`` observations (a later one may name their keys), in seq order, then the rest
    in seq order. The drain passes them only once the whole line is in view (earlier, seq
    order keeps its head moving): a chain of observations each waiting for the one before is
    the stream's end when its first starts last; started first, it ends while the others'
    calls fill the server's slots."""
    first = [i for i, e in enumerate(line) if e.pk in awaited]
    return first + [i for i, e in enumerate(line) if e.pk not in awaited]


def shown_in_line(earlier: list[int], planning: dict[int, Future[Prepared | None]],
                  extracted: dict[int, Evidence | None]) -> list[Ahead] | None:
    """What extraction is shown of the ``earlier`` observations of a line: each one's plan
    when it is made, else its facts as accepted (a guess the commit checks like any head
    shown); None while one is not extracted yet."""
    ahead: list[Ahead] = []
    for pk in earlier:
        future = planning.get(pk)
        if future is not None and future.done() and future.exception() is None:
            prepared = future.result()
            if prepared is not None and prepared.plan is not None:
                ahead.append((prepared.evidence, prepared.plan.items))
        elif pk in extracted:
            evidence = extracted[pk]
            if evidence is not None:
                ahead.append(as_accepted(evidence))
        else:
            return None
    return ahead


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
