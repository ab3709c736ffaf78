"""The write path between the services and the model: extraction, key identity, annotation,
and the embeddings refreshed after commit (SPEC §5).

Every function here runs outside database transactions (model and embedding calls never sit
inside one); the reads it makes are plain snapshots, and the drain lock of the namespace makes
sure nothing else commits to it between planning and applying.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from memory.domain import OpType, Status, normalize_key, same_value

log = logging.getLogger("pmem.pipeline")


@dataclass
class TextExtraction:
    facts: list[dict[str, Any]]
    extractor: str
    raw: str = ""
    error: str | None = None
    chat_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


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


def rule_extractor() -> Any:
    global _rule_extractor
    if _rule_extractor is None:
        from memory.llm.rules import RuleExtractor, patterns_from_settings

        _rule_extractor = RuleExtractor(patterns_from_settings())
    return _rule_extractor


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
        completion_tokens=result.completion_tokens,
    )


def embed_texts(texts: list[str]) -> list[list[float]]:
    from memory.llm.embedding import embedder_from_settings

    return embedder_from_settings().embed(texts) if texts else []


# --- planning: key identity + annotation ---------------------------------------------------


@dataclass(frozen=True)
class HeadView:
    key: str
    value: str | None
    status: str | None
    alternatives: tuple[str, ...]


def _heads(namespace: Any, keys: list[str]) -> dict[str, HeadView]:
    from memory.models import Cell, KeyAlias, Version

    cells = {c.key: c for c in Cell.objects.filter(namespace=namespace, key__in=keys)
             .select_related("head")}
    for alias in KeyAlias.objects.filter(namespace=namespace, alias__in=keys).select_related(
            "cell__head"):
        cells.setdefault(alias.alias, alias.cell)
    alts: dict[int, list[str]] = {}
    contested = [c.pk for c in cells.values() if c.head and c.head.status == Status.CONTESTED]
    for cell_id, value in Version.objects.filter(cell_id__in=contested,
                                                 status=Status.ALTERNATIVE).values_list(
            "cell_id", "value").order_by("id"):
        alts.setdefault(cell_id, []).append(value)
    return {
        k: HeadView(c.key, c.head.value if c.head else None, c.head.status if c.head else None,
                    tuple(alts.get(c.pk, ())))
        for k, c in cells.items()
    }


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


def plan_operations(*, namespace: Any, facts: list[dict[str, Any]], actor: str = "") -> Plan:
    """Turn an observation's facts into typed operations relative to the current heads.

    Client facts with an ``op`` are applied as asked (invalid ones become logged noops).
    Other facts are annotated: by the model in ONE batched call when one is configured,
    else deterministically (accept; withdrawn → revoke of the named value)."""
    from memory.services.graph import OpInput

    plan = Plan()
    client = _client()
    facts = [f for f in facts if normalize_key(str(f.get("key") or ""))]
    if client is not None:
        _resolve_identities(namespace, facts, client, plan)
    keys = sorted({normalize_key(f["key"]) for f in facts})
    heads = _heads(namespace, keys)
    to_annotate = [f for f in facts if not f.get("op")]
    annotated = _annotate(to_annotate, heads, client, plan)
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
            fact_actor = "annotator" if client is not None else "extractor"
            if op == OpType.REVOKE:
                version = _withdrawn_target(namespace, key, value)
                if version is None:
                    op, reason = OpType.NOOP, f"withdrawn value {value!r} is not in memory"
        plan.items.append((OpInput(key=key, op=op, value=value, version_id=version,
                                   reason=reason, raw_output=raw,
                                   payload={"assertion": fact.get("assertion", "asserted"),
                                            "hard_commit": bool(fact.get("hard_commit"))}),
                           fact_actor))
    return plan


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
        result = annotate(client, items)
        plan.chat_calls += 1
        plan.prompt_tokens += result.prompt_tokens
        plan.completion_tokens += result.completion_tokens
    raw = getattr(result, "raw", "") or ""
    out = []
    for item, ann in zip(items, result.ops, strict=True):
        out.append({"op": ann.op, "value": ann.value, "reason": ann.reason, "raw": raw,
                    "valid": ann.valid})
    return out


def _resolve_identities(namespace: Any, facts: list[dict[str, Any]], client: Any,
                        plan: Plan) -> None:
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
    vectors = embed_texts([k.replace("_", " ") for k in unknown])
    plan.embed_calls += 1
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


# --- after commit ---------------------------------------------------------------------------


def after_commit(*, namespace: Any, applied: list[Any]) -> None:
    """Refresh the ``key: value`` embeddings of cells whose head moved (outside the commit)."""
    cell_ids = {a.cell.pk for a in applied if a.cell is not None and a.decision is not None}
    if cell_ids:
        cells_refresh_embeddings(cell_ids=cell_ids)


def cells_refresh_embeddings(*, cell_ids: set[int] | list[int]) -> int:
    """Embed every listed cell whose embedded text no longer matches ``key: head value``.

    A concurrent head change between reading and writing is caught by the conditional
    UPDATE (the text must still be what was embedded); it refreshes on its own commit."""
    from memory.domain.render import embedding_text
    from memory.models import Cell

    stale = []
    for cell in Cell.objects.filter(pk__in=list(cell_ids)).select_related("head"):
        text = embedding_text(cell.key, cell.head.value) if cell.head else ""
        if text != cell.embedded_text or (cell.key_embedding is None):
            stale.append((cell, text))
    if not stale:
        return 0
    texts = [t or c.key for c, t in stale]
    key_texts = [c.key.replace("_", " ") for c, _ in stale]
    vectors = embed_texts(texts + key_texts)
    n = len(stale)
    for (cell, text), vec, kvec in zip(stale, vectors[:n], vectors[n:], strict=True):
        Cell.objects.filter(pk=cell.pk, embedded_text=cell.embedded_text).update(
            embedded_text=text, embedding=vec if text else None, key_embedding=kvec)
    return n
