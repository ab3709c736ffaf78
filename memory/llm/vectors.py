"""The vectors of one observation, computed outside any transaction.

With a remote embedder, embeddings cost ONE batch per observation (:func:`observation_vectors`,
at extraction): the evidence text, every key of its facts and every ``key: value`` it may
install. Soft identity
and the refresh after commit reuse them; the commit writes a moved cell's embedding from them
(:func:`commit_vectors`). A cheap embedder's vectors are computed where they are needed
instead of travelling through the database (recomputing is cheaper than the round trip); a deferred one's after the commit, in
the background (memory.services.embeddings).
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memory.domain import normalize_key
from memory.domain.render import embedding_text, key_text

from .embedding import EmbeddingError, embed_batch, embedder_from_settings

log = logging.getLogger("pmem.llm")

#: A vector as the commit carries it: a list, or a (read-only) numpy array of the embedder's.
Vector = Sequence[float] | np.ndarray
#: Texts (``key: value``, a key's words) and their vectors, computed before a commit.
Vectors = dict[str, Vector]


def pack_vector(vector: Sequence[float]) -> str:
    """A vector as base64 float32 (pgvector stores float4: nothing is lost), for JSON."""
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode()


def unpack_vector(packed: str) -> list[float]:
    return [float(x) for x in np.frombuffer(base64.b64decode(packed), dtype="<f4")]


def _unpacked(packed: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(packed), dtype="<f4")


@dataclass
class ObservationVectors:
    evidence: list[float] | None
    cache: dict[str, str]  # text -> packed vector, for identity and the refresh after commit
    embed_calls: int


def _texts(pairs: Iterable[tuple[Any, Any]]) -> list[str]:
    """Each key's text and each ``key: value`` a pair may install, once, in order."""
    wanted: list[str] = []
    for raw_key, value in pairs:
        key = normalize_key(str(raw_key or ""))
        if not key:
            continue
        wanted.append(key_text(key))
        if value is not None and str(value).strip():
            wanted.append(embedding_text(key, str(value)))
    return list(dict.fromkeys(t for t in wanted if t))


def observation_vectors(*, text: str, facts: list[dict[str, Any]]) -> ObservationVectors:
    """Embed, in ONE batch, the evidence text, every key of the facts and every
    ``key: value`` they may install. Raises ``EmbeddingError`` (the caller retries).

    A *cheap* embedder (the built-in hashing one: local, deterministic, microseconds per
    text) embeds only the evidence text here: the commit computes the vectors it needs on the
    spot (:func:`commit_vectors`), which costs less than shipping them through the database.
    A *deferred* embedder (the local semantic one: milliseconds per text) embeds only the
    facts' keys here, which soft identity compares with the registered ones when the
    observation is planned: on the extraction's thread, off the path of the line's head, whose
    plan would otherwise wait on them (the commit also installs a new cell's key vector from
    them); the observation and the cells it moves are embedded in the background after it."""
    embedder = embedder_from_settings()
    if getattr(embedder, "deferred", False):
        keys = list(dict.fromkeys(key_text(k) for k in (normalize_key(str(f.get("key") or ""))
                                                        for f in facts) if k))
        if not keys:
            return ObservationVectors(None, {}, 0)
        try:
            vectors, calls = embed_batch(keys)
        except EmbeddingError as exc:  # the plan embeds them (or skips soft identity) as before
            log.warning("keys left to the plan to embed: %s", exc)
            return ObservationVectors(None, {}, 0)
        return ObservationVectors(None, {t: pack_vector(v) for t, v in zip(keys, vectors,
                                                                          strict=True)}, calls)
    if getattr(embedder, "cheap", False):
        vectors, calls = embed_batch([text] if text else [])
        return ObservationVectors(vectors[0] if text else None, {}, calls)
    wanted = _texts((f.get("key"), f.get("value")) for f in facts)
    batch = ([text] if text else []) + wanted
    vectors, calls = embed_batch(batch)
    evidence = vectors[0] if text else None
    rest = vectors[1:] if text else vectors
    return ObservationVectors(evidence, {t: pack_vector(v) for t, v in zip(wanted, rest,
                                                                          strict=True)}, calls)


def commit_vectors(pairs: Iterable[tuple[Any, Any]],
                   cached: dict[str, str]) -> Vectors:
    """The vectors a commit of these ``(key, value)`` pairs may install (text -> vector):
    each ``key: value`` and each key, from the observation's ``cached`` vectors, the rest
    computed here when the embedder is cheap. Call it before the transaction opens; what is
    still missing (a rollback reinstating an older value) is refreshed after commit."""
    wanted = _texts(pairs)
    out: Vectors = {t: _unpacked(cached[t]) for t in wanted if t in cached}
    missing = [t for t in wanted if t not in out]
    embedder = embedder_from_settings()
    if missing and getattr(embedder, "cheap", False):
        arrays = getattr(embedder, "embed_arrays", None)
        vectors = arrays(missing) if arrays is not None else embed_batch(missing)[0]
        out.update(zip(missing, vectors, strict=True))
    return out
