"""The default embedder: all-MiniLM-L6-v2 in numpy, held to sentence-transformers' own vectors
(tests/llm/fixtures/minilm.npz, made by tools/make_embedding_fixture.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memory.llm.embedding import MiniLMEmbedder
from memory.llm.minilm import MAX_TOKENS, MiniLM, model_dir

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "minilm.npz"


@pytest.fixture(scope="module")
def model() -> MiniLM:
    return MiniLM()


def test_vectors_match_sentence_transformers_within_1e_4_cosine(model: MiniLM) -> None:
    fixture = np.load(FIXTURE)
    texts = [str(t) for t in fixture["texts"]]
    reference = fixture["vectors"].astype(np.float32)
    reference /= np.linalg.norm(reference, axis=1, keepdims=True)

    got = model.encode(texts)

    assert len(texts) >= 250
    cosines = (got * reference).sum(axis=1)
    worst = int(cosines.argmin())
    assert cosines[worst] >= 1 - 1e-4, texts[worst]


def test_a_text_encodes_alike_alone_and_in_a_batch(model: MiniLM) -> None:
    texts = ["ring_77_location: garden shed", "a much longer text " * 20, "x"]

    together = model.encode(texts)
    alone = np.stack([model.encode([t])[0] for t in texts])

    assert np.allclose(together, alone, atol=1e-5)


def test_a_long_text_is_cut_at_the_models_length(model: MiniLM) -> None:
    ids = model.tokenizer.ids("word " * 1000)

    assert len(ids) == MAX_TOKENS
    assert ids[0] == model.tokenizer.cls and ids[-1] == model.tokenizer.sep


def test_meaning_is_closer_than_unrelated_words() -> None:
    embedder = MiniLMEmbedder()
    food, pet, question = (np.array(v) for v in embedder.embed(
        ["user_favorite_food: sushi", "user_pet: a cat named Miso", "What do I like to eat?"]))

    assert question @ food > question @ pet


def test_the_weights_are_mapped_from_the_wheel_not_copied() -> None:
    # Every process maps the same file: its pages are shared, not one copy per process.
    script = (
        "import sys; sys.path.insert(0, '.');"
        "from memory.llm.minilm import MiniLM; m = MiniLM(); m.encode(['warm'])\n"
        "maps = open('/proc/self/smaps').read().split('\\n')\n"
        "print(sum(1 for line in maps if 'model.safetensors' in line))"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[2])

    assert int(out.stdout) >= 1
    assert (model_dir() / "model.safetensors").stat().st_size > 80_000_000
