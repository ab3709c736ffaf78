"""Planning: an observation's facts become typed operations relative to the current heads
(SPEC §5.3, §5.4).

Planning reads the graph through an :class:`~memory.services.overlay.Overlay`: inside the
commit's transaction, the locked overlay that already holds what the group's earlier
observations did (no model involved: a group commits as one at a time would); with a model, a snapshot read before the
transaction, because a model call never sits inside one (the namespace's drain lock keeps other
commits out until the plan is applied). Client facts with an ``op`` are applied as asked;
the others are annotated — by the model in ONE batched call, else deterministically.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from memory import metrics
from memory.domain import (
    SYSTEM_ACTOR,
    HeadView,
    Item,
    Method,
    OpInput,
    OpType,
    Plan,
    normalize_key,
)
from memory.domain.render import key_text
from memory.llm.annotation import AnnotationItem, annotate, annotate_without_model
from memory.llm.client import ModelClient, client_from_settings
from memory.llm.embedding import EmbeddingError, embed_batch
from memory.llm.errors import is_transport
from memory.llm.identity import confirm_same_keys
from memory.llm.vectors import unpack_vector
from memory.models import Evidence, Namespace

from .basis import Basis, nearest_keys, proposal_stands, read_basis
from .batch import Batch
from .ordinals import UnknownOrdinal, version_reference
from .overlay import Overlay, snapshot_overlay

log = logging.getLogger("pmem.planning")

#: The actor of an observation recorded without one (in-process callers that name nobody):
#: the service's own step (SPEC §3). The extractor or annotator is a method, never the actor.
CLIENT_ACTOR = SYSTEM_ACTOR


class ModelUnavailable(Exception):
    """The model could not be reached for a job that cannot be skipped (extraction,
    annotation): the observation waits, and its task retries with backoff, instead of
    committing noops for an outage. ``evidence_id``: the observation that could not be
    prepared (set by the drain), the one failed when the retries run out. ``cause``: the
    typed failure that made the model unavailable (raised ``from`` it); ``message``: what the
    observation shows, when it fails for good (``str(cause)`` when not given)."""

    def __init__(self, cause: Exception, message: str | None = None, *,
                 evidence_id: int | None = None) -> None:
        super().__init__(str(cause) if message is None else message)
        self.cause = cause
        self.evidence_id = evidence_id


def plan_facts(*, facts: list[dict[str, Any]], actor: str, overlay: Overlay,
               client: ModelClient | None = None, plan: Plan | None = None,
               apply: Apply | None = None, apply_last: bool = True) -> Plan:
    """Turn facts into typed operations relative to the overlay's heads.

    Client facts with an ``op`` are applied as asked (invalid ones become logged noops).
    Other facts are annotated: what the model read (:func:`model_reads`) by ``client`` in
    ONE batched call, the rest deterministically (accept, noop when it repeats the head;
    withdrawn → revoke of the named value). An answer that is unusable becomes noops with
    the raw output kept; no answer at all (the model is unreachable after its retries)
    raises :class:`ModelUnavailable`.

    Each fact is classified against the state the observation's earlier facts leave, as if
    they were applied one after another: the facts are planned in rounds, round r holding
    the r-th fact of each key, and ``apply`` brings the overlay up to date after each round
    (the commit's batch; before the commit, a dry run on the snapshot). With one fact per
    key — nearly always — there is one round. ``apply_last=False`` skips applying the last
    round (a dry run has nothing to learn from it)."""
    plan = plan or Plan()
    facts = [dict(f) for f in facts if normalize_key(str(f.get("key") or ""))]
    rounds = _rounds(facts, overlay)
    for number, round_ in enumerate(rounds, start=1):
        items = _plan_round(round_, actor, overlay, client, plan)
        plan.items += items
        if apply is not None and (apply_last or number < len(rounds)):
            apply(items)
    return plan


#: What applies a round's operations to the overlay planning reads.
Apply = Callable[[list[Item]], None]


def model_reads(fact: dict[str, Any]) -> bool:
    """Does the model annotate (and soft identity look at) this fact? What the model
    extracted itself, and a client's fact marked ``annotate``; never a client's other facts
    nor what the rule extractor read (SPEC §5.4). A fact stored before facts carried an
    ``origin`` is read by the model, as it was then."""
    origin = fact.get("origin")
    return origin not in ("client", "rule") or (origin == "client" and bool(fact.get("annotate")))


def _rounds(facts: list[dict[str, Any]], overlay: Overlay) -> list[list[dict[str, Any]]]:
    """The facts split so that no round names one cell twice (an alias and its key are one
    cell), each round keeping the facts' order."""
    rounds: list[list[dict[str, Any]]] = []
    seen: dict[object, int] = {}
    for fact in facts:
        key = normalize_key(fact["key"])
        cell = overlay.cells.get(key)
        name: object = cell.pk if cell is not None else key
        index = seen.get(name, 0)
        seen[name] = index + 1
        if index == len(rounds):
            rounds.append([])
        rounds[index].append(fact)
    return rounds


def _plan_round(facts: list[dict[str, Any]], actor: str, overlay: Overlay,
                client: ModelClient | None, plan: Plan) -> list[Item]:
    """Plan facts that name distinct cells against the overlay as it stands."""
    known = overlay.head_views(sorted({normalize_key(f["key"]) for f in facts}))
    to_annotate = [f for f in facts if not f.get("op")]
    asked = [f for f in to_annotate if client is not None and model_reads(f)]
    ruled = [f for f in to_annotate if not (client is not None and model_reads(f))]
    annotated = dict(zip(map(id, asked), _annotate(asked, known, client, plan), strict=True))
    annotated.update(zip(map(id, ruled), _annotate(ruled, known, None, plan), strict=True))
    items: list[Item] = []
    for fact in facts:
        key = normalize_key(fact["key"])
        value = None if fact.get("value") is None else str(fact["value"])
        if fact.get("op"):
            op, reason, raw = OpType(fact["op"]), str(fact.get("reason") or ""), ""
            version, method = fact.get("version"), Method.EXPLICIT
            try:  # "v3": the key's third version (SPEC §11.5)
                cell = overlay.cells.get(key)
                version = version_reference(cell_id=cell.pk if cell else None, version=version)
            except UnknownOrdinal as unknown:
                op, reason, version = OpType.NOOP, str(unknown), None
        else:
            ann = annotated[id(fact)]
            op, reason, raw, version = OpType(ann["op"]), ann["reason"], ann["raw"], None
            value = ann["value"]
            method = _method(fact, by_model=client is not None and ann["by_model"])
            if op == OpType.REVOKE:
                version = overlay.withdrawn_target(key, value)
                if version is None:
                    op, reason = OpType.NOOP, f"withdrawn value {value!r} is not in memory"
        items.append((OpInput(key=key, op=op, value=value, version_id=version, reason=reason,
                              raw_output=raw, payload=_payload(fact), method=method),
                      actor or CLIENT_ACTOR))
    return items


def _method(fact: dict[str, Any], *, by_model: bool) -> Method:
    """How a fact without an op was decided (SPEC §3)."""
    if fact.get("alias_of"):  # the key was found by soft identity (SPEC §5.3)
        return Method.IDENTITY
    if by_model:
        return Method.MODEL
    # A client's fact, or a create on a key without a head, is decided without the model.
    return Method.CLIENT if fact.get("origin") == "client" else Method.RULE


def plan_with_model(*, namespace: Namespace, facts: list[dict[str, Any]], actor: str = "",
                    vectors: dict[str, str] | None = None, evidence: Evidence | None = None,
                    shown: Sequence[dict[str, Any]] = (), ahead: Sequence[Ahead] = ()) -> Plan:
    """:func:`plan_facts` outside any transaction, on a snapshot of the heads, with soft key
    identity first for the facts the model reads. ``vectors`` are the observation's cached
    embeddings (:func:`memory.llm.vectors.observation_vectors`); ``evidence``, the
    observation (its source and valid time place a dry run's facts as the commit will);
    ``shown``, the heads extraction saw: a fact's proposed op stands while its head does.

    The plan carries its :class:`~memory.services.basis.Basis`, so that it may be made ahead
    of its turn and checked at the commit (SPEC §5.5). ``ahead``: the plans of earlier
    observations not committed yet, in seq order; their operations on the keys this one
    names are applied to its snapshot first (a dry run), so that an observation updating a
    key an earlier one is about to write is planned now rather than at its turn. It is
    used only where what is read stays a cell's head and one round plans every fact (no
    cell named twice, no withdrawal on such a cell), and where the earlier plans write a key
    this one names as it names it (not under another name, an alias one of them will
    register); else :class:`PlanAtTurn` is raised: a plan on the state before them would be
    stale for certain."""
    if ahead:
        planned = _plan_on_ahead(namespace, facts, ahead)
        if planned is None:
            raise PlanAtTurn
        facts, overlay, moved = planned
        return _plan_on(namespace, facts, actor, overlay, vectors, evidence, shown,
                        ahead, moved)
    return _plan_on(namespace, [dict(f) for f in facts
                                if normalize_key(str(f.get("key") or ""))],
                    actor, None, vectors, evidence, shown, (), frozenset())


class PlanAtTurn(Exception):
    """The earlier plans it was offered do not let this observation be planned now: it is
    planned at its turn, on the state they leave."""


#: Earlier observations' plans, not committed yet: (the observation, its operations).
Ahead = tuple[Evidence, list[Item]]


def _plan_on(namespace: Namespace, facts: list[dict[str, Any]], actor: str,
             overlay: Overlay | None, vectors: dict[str, str] | None,
             evidence: Evidence | None, shown: Sequence[dict[str, Any]],
             ahead: Sequence[Ahead], moved: frozenset[str]) -> Plan:
    plan = Plan()
    basis = Basis()
    client = client_from_settings()
    written = sorted({normalize_key(f["key"]) for f in facts})
    overlay = overlay or snapshot_overlay(namespace, written)
    known = set(overlay.cells)
    read = [f for f in facts if model_reads(f)]
    if client is not None and read:
        _resolve_identities(namespace, read, client, plan, vectors or {},
                            known=known, basis=basis)
    # The names as written, as identity saw them: one that an earlier commit has named since
    # (an alias it registered) must send the plan back, even where a later read agrees.
    read_basis(overlay, written, (), basis, ahead=moved)
    names = sorted(set(written) | {normalize_key(f["key"]) for f in facts})
    if names != written:
        overlay, moved = overlay_ahead(namespace, names, ahead)
        read_basis(overlay, [n for n in names if n not in written], (), basis, ahead=moved)
    if moved and not _reads_heads_only(facts, overlay, moved):
        # Identity moved a fact onto a cell the earlier plans write, and it now needs more
        # than that cell's head (a second fact on it, a withdrawal): planned on the
        # committed state, checked at the commit like any plan.
        overlay, moved = _on_committed(namespace, names, written, known, basis), frozenset()
    read_basis(overlay, (), [(normalize_key(f["key"]), str(f["value"])) for f in facts
                             if f.get("assertion") == "withdrawn" and f.get("value")], basis)
    if basis.ahead:
        metrics.PLANS_ON_EARLIER.inc()
    if client is not None:
        _take_proposals(facts, overlay, shown)
    plan = plan_facts(facts=facts, actor=actor, overlay=overlay, client=client, plan=plan,
                      apply=_dry_run(namespace, overlay, evidence), apply_last=False)
    plan.basis = basis
    return plan


def _on_committed(namespace: Namespace, names: list[str], written: list[str],
                  known: set[str], basis: Basis) -> Overlay:
    """A snapshot of ``names`` with no earlier plan applied, and ``basis`` read again as
    planning on it reads: each name as written by what identity took it for (no cell, where
    it found none), the rest by its head now. A plan on the earlier plans' state would
    number versions as the commit will not; this one is planned again at the commit
    whenever those plans, or anything since identity looked, moved what it read."""
    overlay = snapshot_overlay(namespace, names)
    basis.heads.clear()
    basis.ahead.clear()
    read_basis(overlay, [n for n in written if n in known], (), basis)
    basis.heads.update((name, None) for name in written if name not in known)
    read_basis(overlay, [n for n in names if n not in written], (), basis)
    return overlay


def _plan_on_ahead(namespace: Namespace, facts: Sequence[dict[str, Any]],
                   ahead: Sequence[Ahead]) -> tuple[list[dict[str, Any]], Overlay,
                                                     frozenset[str]] | None:
    """The facts and the overlay to plan them on, earlier plans applied; None when a cell
    is named by more than one fact, or one those plans move by a withdrawal: what that
    reads is more than its head (a version to revoke, the history a revocation reinstates),
    which a dry run on a snapshot does not hold as the commit will."""
    facts = [dict(f) for f in facts if normalize_key(str(f.get("key") or ""))]
    written = sorted({normalize_key(f["key"]) for f in facts})
    overlay, moved = overlay_ahead(namespace, written, ahead)
    if not moved or not _reads_heads_only(facts, overlay, moved):
        return None
    return facts, overlay, moved


def _reads_heads_only(facts: Sequence[dict[str, Any]], overlay: Overlay,
                      moved: frozenset[str]) -> bool:
    """Does planning ``facts`` read only the heads of the cells named in ``moved``, and is
    it made in one round? A later round is planned on a dry run of the earlier ones, whose
    new versions a withdrawal may name by the ids the dry run gave them — ids the commit
    gives again only when its overlay numbered nothing before them, as an earlier plan's
    operations applied here do."""
    cells = [overlay.cells[name].key if name in overlay.cells else name
             for name in (normalize_key(f["key"]) for f in facts)]
    return len(cells) == len(set(cells)) and not any(
        f.get("assertion") == "withdrawn" and normalize_key(f["key"]) in moved for f in facts)


def overlay_ahead(namespace: Namespace, names: Sequence[str],
                   ahead: Sequence[Ahead]) -> tuple[Overlay, frozenset[str]]:
    """The snapshot of ``names``, with the earlier plans' operations on them applied in seq
    order (in memory only), and the names whose cells those operations touched."""
    overlay = snapshot_overlay(namespace, names)
    wanted = set(names)
    touched: set[str] = set()
    for earlier, items in ahead:
        mine = [item for item in items if normalize_key(item[0].key) in wanted]
        if mine:
            _dry_run(namespace, overlay, earlier)(mine)
            touched |= {normalize_key(item[0].key) for item in mine}
    moved = frozenset(name for name in names if name in overlay.cells
                      and overlay.cells[name].key in touched)
    return overlay, moved


def _take_proposals(facts: list[dict[str, Any]], overlay: Overlay,
                    shown: Sequence[dict[str, Any]]) -> None:
    """Mark the facts whose proposed op stands (``patch``): the first fact of each key the
    model extracted, when the head it was shown is still the head. A later fact of the same
    key is planned on what the earlier one leaves, which the model was not shown."""
    first: set[str] = set()
    for fact in facts:
        key = normalize_key(fact["key"])
        if key in first:
            continue
        first.add(key)
        if fact.get("origin") == "model":
            op = proposal_stands(fact, shown, overlay.head_views([key]).get(key))
            if op is not None:
                fact["patch"] = op


def _dry_run(namespace: Namespace, overlay: Overlay, evidence: Evidence | None) -> Apply:
    """Apply a round's operations to a snapshot, in memory only (nothing is written): what
    the next round of the same observation is planned against."""
    batch = Batch(namespace, overlay, {})

    def apply(items: list[Item]) -> None:
        for item, _ in items:
            if item.creates:
                overlay.provisional_cell(namespace.pk, normalize_key(item.key))
        batch.apply(items, evidence=evidence)

    return apply


def _payload(fact: dict[str, Any]) -> dict[str, Any]:
    payload = {"assertion": fact.get("assertion", "asserted"),
               "hard_commit": bool(fact.get("hard_commit"))}
    if fact.get("alias_of"):
        payload["alias_of"] = fact["alias_of"]  # the name the observation used
    if fact.get("identity_rule"):  # soft identity's pre-check told it from this key
        payload["identity"] = {"decided_by": "rule", "same": False,
                               "compared_with": fact["identity_rule"]}
    if fact.get("metadata"):  # metadata: the writer keeps it with the version this creates
        payload["metadata"] = fact["metadata"]
    if fact.get("expires_at"):  # SPEC §13: the writer keeps it with the version this creates
        payload["expires_at"] = fact["expires_at"]
    return payload


def _annotate(facts: list[dict[str, Any]], heads: dict[str, HeadView],
              client: ModelClient | None, plan: Plan) -> list[dict[str, Any]]:
    """One decision per fact: by the rules (no client), else by the proposal extraction
    made while it stands, and by the model in ONE call for the rest."""
    if not facts:
        return []
    items = []
    for fact in facts:
        key = normalize_key(fact["key"])
        head = heads.get(key)
        items.append(AnnotationItem(
            key=key, new_value="" if fact.get("value") is None else str(fact["value"]),
            assertion=fact.get("assertion") or "asserted",
            head_value=head.value if head else None, head_status=head.status if head else None,
            alternatives=list(head.alternatives) if head else [],
            hard_commit=bool(fact.get("hard_commit")), op_hint=fact.get("hint"),
        ))
    if client is None:
        result = annotate_without_model(items)
    else:
        result = annotate(client, items, proposed=[f.get("patch") for f in facts])
        plan.chat_calls += result.calls  # 0 when every fact was a create (SPEC §5.4)
        plan.prompt_tokens += result.prompt_tokens
        plan.completion_tokens += result.completion_tokens
        if is_transport(result.failure):
            raise ModelUnavailable(result.failure, f"annotation failed: {result.failure}"
                                   ) from result.failure
    return [{"op": ann.op, "value": ann.value, "reason": ann.reason,
             "raw": (result.raw or "") if ann.by_model else "", "valid": ann.valid,
             "by_model": ann.by_model} for ann in result.ops]


def _resolve_identities(namespace: Namespace, facts: list[dict[str, Any]],
                        client: ModelClient, plan: Plan, cached: dict[str, str], *,
                        known: set[str], basis: Basis) -> bool:
    """Soft key identity (SPEC §5.3): each new key whose nearest registered key has cosine ≥
    the threshold, and that the deterministic pre-check (memory.domain.keyrule) leaves open,
    is shown, by name only, to the model — every such pair of the observation in ONE call; on 'same' the fact moves to that key and the new name becomes an alias
    (registered at commit). What it compared with goes into ``basis``. True when a fact
    moved."""
    unknown = list(dict.fromkeys(k for k in (normalize_key(f["key"]) for f in facts)
                                 if k not in known))
    if not unknown:
        return False
    vectors = _key_vectors(unknown, cached, plan)
    if vectors is None:
        return False  # no embedder: exact match only (a fork is recoverable, a wrong merge not)
    nearest = nearest_keys(namespace.pk, vectors, unknown)
    for key, near, vec in zip(unknown, nearest, vectors, strict=True):
        basis.nearest[key] = (near, list(vec))
    told_apart = {key: ruled for key, (asked, ruled) in zip(unknown, nearest, strict=True)
                  if asked is None and ruled is not None}
    for fact in facts:
        key = normalize_key(fact["key"])
        if key in told_apart:  # the pre-check decided it: a new key, no model call
            fact["identity_rule"] = told_apart[key]
    pairs = [(key, asked) for key, (asked, _) in zip(unknown, nearest, strict=True)
             if asked is not None]
    if not pairs:
        return False
    verdicts, call = confirm_same_keys(client, pairs)
    plan.chat_calls += 1
    plan.prompt_tokens += call.prompt_tokens
    plan.completion_tokens += call.completion_tokens
    merged = {key: near for (key, near), same in zip(pairs, verdicts, strict=True) if same}
    plan.aliases += list(merged.items())
    for fact in facts:
        key = normalize_key(fact["key"])
        if key in merged:
            fact["alias_of"], fact["key"] = key, merged[key]
    return bool(merged)


def _key_vectors(keys: list[str], cached: dict[str, str],
                 plan: Plan) -> list[list[float]] | None:
    """Vectors of ``keys`` from the observation's cache; the missing ones in one batch.
    None when the embedder fails (soft identity is then skipped, and logged)."""
    texts = [key_text(k) for k in keys]
    missing = [t for t in texts if t not in cached]
    fresh: dict[str, list[float]] = {}
    if missing:
        try:
            vectors, calls = embed_batch(missing)
        except EmbeddingError as exc:
            log.warning("key identity skipped (embedder failed): %s", exc)
            return None
        plan.embed_calls += calls
        fresh = dict(zip(missing, vectors, strict=True))
    return [fresh[t] if t in fresh else unpack_vector(cached[t]) for t in texts]
