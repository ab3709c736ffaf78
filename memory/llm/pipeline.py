"""The write path between the services and the model: extraction, key identity, annotation,
and the embeddings refreshed after commit (SPEC §5).

Every function here runs outside database transactions (model and embedding calls never sit
inside one); the reads it makes are plain snapshots, and the drain lock of the namespace makes
sure nothing else commits to it between planning and applying.

Cost per observation (issue 4): at most two chat calls — extraction and ONE batched
annotation — plus one identity confirmation per key that is new yet close to a registered key.
Embeddings: ONE batch (:func:`observation_vectors`, at extraction) holds the evidence text,
every key of its facts and every ``key: value`` it may install; identity and the refresh after
commit reuse those vectors. A second batch happens only when a commit moves a head to text the
observation did not contain (a rollback reinstating an older value, a key merged into another
key's name) or when the cached vectors are missing.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.core.signals import setting_changed

from memory.domain import OpType, Status, normalize_key, same_value

log = logging.getLogger("pmem.pipeline")


class ModelUnavailable(Exception):
    """The model could not be reached for a job that cannot be skipped (annotation): the
    observation fails visibly and may be retried, instead of committing noops for an outage."""


@dataclass
class TextExtraction:
    facts: list[dict[str, Any]]
    extractor: str
    raw: str = ""
    error: str | None = None
    chat_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    dropped: list[dict[str, str]] = field(default_factory=list)  # model facts refused


@dataclass
class Plan:
    """The operations one observation will apply, with what planning them cost."""

    items: list[tuple[Any, str]] = field(default_factory=list)  # (OpInput, actor)
    chat_calls: int = 0
    embed_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    aliases: list[tuple[str, str]] = field(default_factory=list)  # (alias, canonical key)


def _client() -> Any:
    from memory.llm.client import client_from_settings

    return client_from_settings()


def _fact_dict(fact: Any) -> dict[str, Any]:
    # A rule pattern's op is a hint for annotation, not an operation a client asked for.
    return {"key": fact.key, "value": fact.value, "op": None, "hint": fact.op, "version": None,
            "hard_commit": False, "assertion": fact.assertion}


_rule_extractor: Any = None


def _forget_rule_extractor(*, setting: str, **_: Any) -> None:
    global _rule_extractor
    if setting == "PMEM_RULE_PATTERNS":
        _rule_extractor = None


setting_changed.connect(_forget_rule_extractor)


def _forget_embedder(*, setting: str, **_: Any) -> None:
    # The embedder is built once per process; a test's settings change must rebuild it.
    if setting.startswith("PMEM_EMBED"):
        from memory.llm.embedding import reset_embedder_cache

        reset_embedder_cache()


setting_changed.connect(_forget_embedder)


def rule_extractor() -> Any:
    global _rule_extractor
    if _rule_extractor is None:
        from memory.llm.rules import RuleExtractor, patterns_from_settings

        _rule_extractor = RuleExtractor(patterns_from_settings())
    return _rule_extractor


def runs_locally() -> bool:
    """No chat model and a cheap embedder: extraction, planning and the vectors are pure
    CPU, so a drain may do them inside its commit transaction (and group observations)."""
    from memory.llm.embedding import embedder_from_settings

    return _client() is None and bool(getattr(embedder_from_settings(), "cheap", False))


def extract_text(text: str) -> TextExtraction:
    """Facts from free text: the model when configured (one call), else the rule extractor."""
    client = _client()
    if client is None:
        facts = rule_extractor().extract(text)
        return TextExtraction([_fact_dict(f) for f in facts], "rules")
    from memory.llm.extraction import extract_facts

    result = extract_facts(client, text)
    return TextExtraction(
        [_fact_dict(f) for f in result.facts], "model", raw=result.raw, error=result.error,
        chat_calls=1, prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens, dropped=result.dropped,
    )


def embed_texts(texts: list[str]) -> list[list[float]]:
    """One batch through the configured embedder. Raises ``EmbeddingError`` when a remote
    embedder fails after its retries."""
    from memory.llm.embedding import embedder_from_settings

    return embedder_from_settings().embed(texts) if texts else []


def embed_batch(texts: Sequence[str]) -> tuple[list[list[float]], int]:
    """:func:`embed_texts`, with the number of embedding calls it cost (a local embedder
    costs none; a remote one costs one request per non-empty batch)."""
    from memory.llm.embedding import RemoteEmbedder, embedder_from_settings

    if not texts:
        return [], 0
    embedder = embedder_from_settings()
    vectors = embedder.embed(list(texts))
    return vectors, int(isinstance(embedder, RemoteEmbedder))


# --- the observation's one embedding batch -------------------------------------------------


def key_text(key: str) -> str:
    """What a key is embedded as for soft identity: its words."""
    return key.replace("_", " ")


def pack_vector(vector: Sequence[float]) -> str:
    """A vector as base64 float32 (pgvector stores float4: nothing is lost), for JSON."""
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode()


def unpack_vector(packed: str) -> list[float]:
    return [float(x) for x in np.frombuffer(base64.b64decode(packed), dtype="<f4")]


@dataclass
class ObservationVectors:
    evidence: list[float] | None
    cache: dict[str, str]  # text -> packed vector, for identity and the refresh after commit
    embed_calls: int


def observation_vectors(*, text: str, facts: list[dict[str, Any]]) -> ObservationVectors:
    """Embed, in ONE batch, the evidence text, every key of the facts and every
    ``key: value`` they may install. Raises ``EmbeddingError`` (the caller retries).

    A *cheap* embedder (the built-in hashing one: local, deterministic, microseconds per
    text) embeds only the evidence text here: the commit computes the vectors it needs on the
    spot (:func:`commit_vectors`), which costs less than shipping them through the database."""
    from memory.domain.render import embedding_text
    from memory.llm.embedding import embedder_from_settings

    if getattr(embedder_from_settings(), "cheap", False):
        vectors, calls = embed_batch([text] if text else [])
        return ObservationVectors(vectors[0] if text else None, {}, calls)
    wanted: list[str] = []
    for fact in facts:
        key = normalize_key(str(fact.get("key") or ""))
        if not key:
            continue
        wanted.append(key_text(key))
        if fact.get("value") is not None and str(fact["value"]).strip():
            wanted.append(embedding_text(key, str(fact["value"])))
    wanted = list(dict.fromkeys(t for t in wanted if t))
    batch = ([text] if text else []) + wanted
    vectors, calls = embed_batch(batch)
    evidence = vectors[0] if text else None
    rest = vectors[1:] if text else vectors
    return ObservationVectors(evidence, {t: pack_vector(v) for t, v in zip(wanted, rest,
                                                                          strict=True)}, calls)


def commit_vectors(pairs: Iterable[tuple[str, str | None]],
                   cached: dict[str, str]) -> dict[str, Sequence[float]]:
    """The vectors a commit of these ``(key, value)`` pairs may install (text -> vector):
    each ``key: value`` and each key, from the observation's ``cached`` vectors, the rest
    computed here when the embedder is cheap. Call it before the transaction opens; what is
    still missing (a rollback reinstating an older value) is refreshed after commit."""
    from memory.domain.render import embedding_text
    from memory.llm.embedding import embedder_from_settings

    wanted: list[str] = []
    for raw_key, value in pairs:
        key = normalize_key(str(raw_key or ""))
        if not key:
            continue
        wanted.append(key_text(key))
        if value is not None and str(value).strip():
            wanted.append(embedding_text(key, str(value)))
    wanted = list(dict.fromkeys(wanted))
    out: dict[str, Sequence[float]] = {t: _unpacked(cached[t]) for t in wanted if t in cached}
    missing = [t for t in wanted if t not in out]
    embedder = embedder_from_settings()
    if missing and getattr(embedder, "cheap", False):
        arrays = getattr(embedder, "embed_arrays", None)
        vectors = arrays(missing) if arrays is not None else embed_batch(missing)[0]
        out.update(zip(missing, vectors, strict=True))
    return out


def _unpacked(packed: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(packed), dtype="<f4")


# --- planning: key identity + annotation ---------------------------------------------------


@dataclass(frozen=True)
class HeadView:
    key: str
    value: str | None
    status: str | None
    alternatives: tuple[str, ...]


_HEADS_SQL = """
SELECT n.name, c.id, c.key, v.value, v.status
  FROM (SELECT key AS name, id AS cell_id FROM memory_cell
         WHERE namespace_id = %(ns)s AND key = ANY(%(keys)s)
        UNION ALL
        SELECT alias, cell_id FROM memory_keyalias
         WHERE namespace_id = %(ns)s AND alias = ANY(%(keys)s)) AS n
  JOIN memory_cell c ON c.id = n.cell_id
  LEFT JOIN memory_version v ON v.id = c.head_id
"""


def _heads(namespace: Any, keys: list[str]) -> dict[str, HeadView]:
    from django.db import connection

    from memory.models import Version

    # Only what annotation reads, in one query (never the vectors, and no model instances:
    # the queryset version was a tenth of a commit, issue 7). A key is its cell's own name
    # first, an alias of another cell second.
    found: dict[str, tuple[int, str, str | None, str | None]] = {}
    with connection.cursor() as cur:
        cur.execute(_HEADS_SQL, {"ns": namespace.pk, "keys": keys})
        for name, cell_id, key, value, status in cur.fetchall():
            if name not in found or key == name:
                found[name] = (cell_id, key, value, status)
    alts: dict[int, list[str]] = {}
    contested = [cell_id for cell_id, _, _, status in found.values()
                 if status == Status.CONTESTED]
    for cell_id, value in Version.objects.filter(cell_id__in=contested,
                                                 status=Status.ALTERNATIVE).values_list(
            "cell_id", "value").order_by("id"):
        alts.setdefault(cell_id, []).append(value)
    return {name: HeadView(key, value, status, tuple(alts.get(cell_id, ())))
            for name, (cell_id, key, value, status) in found.items()}


def _withdrawn_target(namespace: Any, key: str, value: str | None) -> int | None:
    """The version a 'reported in error' fact names: the newest non-revoked one holding it."""
    from memory.models import Version

    if not value:
        return None
    for vid, v_value in (Version.objects.filter(cell__namespace=namespace, cell__key=key)
                         .exclude(status=Status.REVOKED).order_by("-id")
                         .values_list("id", "value")):
        if same_value(v_value, value):
            return vid
    return None


def plan_operations(*, namespace: Any, facts: list[dict[str, Any]], actor: str = "",
                    vectors: dict[str, str] | None = None) -> Plan:
    """Turn an observation's facts into typed operations relative to the current heads.

    Client facts with an ``op`` are applied as asked (invalid ones become logged noops).
    Other facts are annotated: by the model in ONE batched call when one is configured,
    else deterministically (accept; withdrawn → revoke of the named value). An answer that
    is unusable becomes noops with the raw output kept; no answer at all (the model is
    unreachable after its retries) raises :class:`ModelUnavailable`. ``vectors`` are the
    observation's cached embeddings (:func:`observation_vectors`)."""
    plan = Plan()
    client = _client()
    facts = [dict(f) for f in facts if normalize_key(str(f.get("key") or ""))]
    if client is not None:
        _resolve_identities(namespace, facts, client, plan, vectors or {})
    _plan_items(plan, facts, actor, client,
                heads=lambda keys: _heads(namespace, keys),
                withdrawn=lambda key, value: _withdrawn_target(namespace, key, value))
    return plan


def plan_locally(*, facts: list[dict[str, Any]], actor: str,
                 heads: Callable[[list[str]], dict[str, HeadView]],
                 withdrawn: Callable[[str, str | None], int | None]) -> Plan:
    """:func:`plan_operations` without a model, against heads the caller knows: a group
    commit plans each observation on its batch's overlay, which already holds what the
    previous observations of the group wrote (nothing is read from the database for it)."""
    plan = Plan()
    facts = [dict(f) for f in facts if normalize_key(str(f.get("key") or ""))]
    _plan_items(plan, facts, actor, None, heads=heads, withdrawn=withdrawn)
    return plan


def _plan_items(plan: Plan, facts: list[dict[str, Any]], actor: str, client: Any, *,
                heads: Callable[[list[str]], dict[str, HeadView]],
                withdrawn: Callable[[str, str | None], int | None]) -> None:
    from memory.services.graph import OpInput

    keys = sorted({normalize_key(f["key"]) for f in facts})
    known = heads(keys)
    to_annotate = [f for f in facts if not f.get("op")]
    annotated = _annotate(to_annotate, known, client, plan)
    by_id = {id(f): a for f, a in zip(to_annotate, annotated, strict=True)}
    for fact in facts:
        key = normalize_key(fact["key"])
        value = fact.get("value")
        value = None if value is None else str(value)
        if fact.get("op"):
            op, reason, raw = OpType(fact["op"]), "", ""
            version = fact.get("version")
            fact_actor = actor or "api"
        else:
            ann = by_id[id(fact)]
            op, reason, raw, version = OpType(ann["op"]), ann["reason"], ann.get("raw", ""), None
            value = ann.get("value", value)
            # A create on a key without a head is decided without the model (SPEC §5.4).
            fact_actor = "annotator" if client is not None and ann["by_model"] else "extractor"
            if op == OpType.REVOKE:
                version = withdrawn(key, value)
                if version is None:
                    op, reason = OpType.NOOP, f"withdrawn value {value!r} is not in memory"
        plan.items.append((OpInput(key=key, op=op, value=value, version_id=version,
                                   reason=reason, raw_output=raw,
                                   payload=_payload(fact)),
                           fact_actor))


def _payload(fact: dict[str, Any]) -> dict[str, Any]:
    payload = {"assertion": fact.get("assertion", "asserted"),
               "hard_commit": bool(fact.get("hard_commit"))}
    if fact.get("alias_of"):
        payload["alias_of"] = fact["alias_of"]  # the name the observation used
    return payload


def _annotate(facts: list[dict[str, Any]], heads: dict[str, HeadView], client: Any,
              plan: Plan) -> list[dict[str, Any]]:
    from memory.llm.annotation import AnnotationItem, annotate, annotate_without_model

    if not facts:
        return []
    items = []
    for f in facts:
        key = normalize_key(f["key"])
        head = heads.get(key)
        items.append(AnnotationItem(
            key=key, new_value="" if f.get("value") is None else str(f["value"]),
            assertion=f.get("assertion") or "asserted",
            head_value=head.value if head else None, head_status=head.status if head else None,
            alternatives=list(head.alternatives) if head else [],
            hard_commit=bool(f.get("hard_commit")), op_hint=f.get("hint"),
        ))
    if client is None:
        result = annotate_without_model(items)
    else:
        from memory.llm.client import is_transport_error

        result = annotate(client, items)
        plan.chat_calls += result.calls  # 0 when every fact was a create (SPEC §5.4)
        plan.prompt_tokens += result.prompt_tokens
        plan.completion_tokens += result.completion_tokens
        if is_transport_error(result.error):
            raise ModelUnavailable(f"annotation failed: {result.error}")
    raw = getattr(result, "raw", "") or ""
    return [{"op": ann.op, "value": ann.value, "reason": ann.reason,
             "raw": raw if ann.by_model else "", "valid": ann.valid, "by_model": ann.by_model}
            for ann in result.ops]


def _resolve_identities(namespace: Any, facts: list[dict[str, Any]], client: Any,
                        plan: Plan, cached: dict[str, str]) -> None:
    """Soft key identity (SPEC §5.3): a new key whose nearest registered key has cosine ≥ the
    threshold is shown, by name only, to the model; on 'same' the fact moves to that key and
    the new name becomes an alias (registered at commit)."""
    from django.conf import settings
    from pgvector.django import CosineDistance

    from memory.llm.identity import confirm_same_key
    from memory.models import Cell, KeyAlias

    new_keys = []
    for f in facts:
        key = normalize_key(f["key"])
        if key not in new_keys:
            new_keys.append(key)
    known = set(Cell.objects.filter(namespace=namespace, key__in=new_keys).values_list("key", flat=True))
    known |= set(KeyAlias.objects.filter(namespace=namespace, alias__in=new_keys)
                 .values_list("alias", flat=True))
    unknown = [k for k in new_keys if k not in known]
    if not unknown:
        return
    vectors = _key_vectors(unknown, cached, plan)
    if vectors is None:
        return  # no embedder: exact match only (a fork is recoverable, a wrong merge is not)
    threshold = settings.PMEM_IDENTITY_THRESHOLD
    merged: dict[str, str] = {}
    for key, vec in zip(unknown, vectors, strict=True):
        nearest = (Cell.objects.filter(namespace=namespace, key_embedding__isnull=False)
                   .annotate(d=CosineDistance("key_embedding", vec)).order_by("d")
                   .values_list("key", "d").first())
        if nearest is None or 1 - nearest[1] < threshold:
            continue
        verdict = confirm_same_key(client, key, nearest[0])
        plan.chat_calls += 1
        plan.prompt_tokens += verdict.prompt_tokens
        plan.completion_tokens += verdict.completion_tokens
        if verdict.same:
            merged[key] = nearest[0]
            plan.aliases.append((key, nearest[0]))
    for f in facts:
        key = normalize_key(f["key"])
        if key in merged:
            f["alias_of"] = key
            f["key"] = merged[key]


def _key_vectors(keys: list[str], cached: dict[str, str],
                 plan: Plan) -> list[list[float]] | None:
    """Vectors of ``keys`` from the observation's cache; the missing ones in one batch.
    None when the embedder fails (soft identity is then skipped, and logged)."""
    from memory.llm.embedding import EmbeddingError

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


# --- after commit ---------------------------------------------------------------------------


def after_commit(*, namespace: Any, applied: list[Any],
                 vectors: dict[str, str] | None = None) -> int:
    """Refresh the ``key: value`` embeddings of cells whose head moved (outside the commit).
    Never raises for an embedder fault: the embeddings stay stale (``embedded_text`` tells)
    and refresh on the cell's next commit. Returns the embedding calls it made."""
    from memory.llm.embedding import EmbeddingError

    cell_ids = {a.cell.pk for a in applied
                if a.cell is not None and a.decision is not None and not a.embedded}
    if not cell_ids:
        return 0
    try:
        return cells_refresh_embeddings(cell_ids=cell_ids, cached=vectors)[1]
    except EmbeddingError as exc:
        log.warning("cell embeddings left stale (embedder failed): %s", exc)
        return 0


def cells_refresh_embeddings(*, cell_ids: set[int] | list[int],
                             cached: dict[str, str] | None = None) -> tuple[int, int]:
    """Embed every listed cell whose embedded text no longer matches ``key: head value``,
    taking vectors from ``cached`` (text -> packed vector) where it has them and embedding
    the rest in one batch. Returns (cells refreshed, embedding calls made).

    A concurrent head change between reading and writing is caught by the conditional
    UPDATE (the text must still be what was embedded); it refreshes on its own commit."""
    from django.db.models import BooleanField, ExpressionWrapper, Q

    from memory.domain.render import embedding_text
    from memory.models import Cell

    cached = cached or {}
    stale = []
    cells = (Cell.objects.filter(pk__in=list(cell_ids)).select_related("head")
             .only("key", "embedded_text", "head__value")
             .annotate(kemb_missing=ExpressionWrapper(Q(key_embedding__isnull=True),
                                                      output_field=BooleanField())))
    for cell in cells:
        text = embedding_text(cell.key, cell.head.value) if cell.head else ""
        if text != cell.embedded_text or cell.kemb_missing:
            stale.append((cell, text))
    if not stale:
        return 0, 0
    wanted = [t or c.key for c, t in stale] + [key_text(c.key) for c, _ in stale]
    missing = list(dict.fromkeys(t for t in wanted if t not in cached))
    vectors, calls = embed_batch(missing)
    found = dict(zip(missing, vectors, strict=True))
    rows = []
    for cell, text in stale:
        vec = found.get(text or cell.key) or unpack_vector(cached[text or cell.key])
        kvec = found.get(key_text(cell.key)) or unpack_vector(cached[key_text(cell.key)])
        rows.append((cell.pk, cell.embedded_text, text, vector_literal(vec) if text else None,
                     vector_literal(kvec)))
    _update_cell_embeddings(rows)
    return len(stale), calls


def vector_literal(vector: Sequence[float]) -> str:
    """pgvector's text form; 6 significant digits keep float32 cosines to ~1e-6.

    Hashing-embedder vectors are mostly zeros (a short text hits a few dozen of 384 slots):
    only their non-zero entries are formatted, which made the literal ~10x cheaper (issue 7)."""
    values = np.asarray(vector, dtype=np.float64)
    nonzero = np.flatnonzero(values)
    if len(nonzero) * 4 < len(values):
        parts = ["0"] * len(values)
        for i, x in zip(nonzero.tolist(), values[nonzero].tolist(), strict=True):
            parts[i] = f"{x:.6g}"
        return "[" + ",".join(parts) + "]"
    return "[" + ",".join(f"{x:.6g}" for x in values.tolist()) + "]"


def _update_cell_embeddings(rows: list[tuple[int, str, str, str | None, str]]) -> None:
    """One UPDATE for all refreshed cells; the ``embedded_text`` guard skips a cell whose
    head moved (and was re-embedded by its own commit) since it was read."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(
            "WITH refreshed AS (UPDATE memory_cell AS c SET embedded_text = v.text,"
            " embedding = v.emb::vector, key_embedding = v.kemb::vector, vector_stale = true"
            " FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[], %s::text[])"
            " AS v(id, old, text, emb, kemb) WHERE c.id = v.id AND c.embedded_text = v.old"
            " RETURNING c.id)"
            " DELETE FROM memory_frontiervector AS f USING refreshed"
            " WHERE f.cell_id = refreshed.id",
            [[r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
             [r[3] for r in rows], [r[4] for r in rows]])
